package workspace

import (
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/blobs"
)

// batches hold the small blobs a save puts when its store is a
// blobs.Batcher (a database, where each Put is a round trip and a
// transaction): files and trees apart, each counted as its own kind in
// the save's stats. They are put when full and before the ref is set.
type batches struct {
	to           blobs.Batcher
	files, trees batch
}

// batch is blobs waiting to be put, and the stats that count those new
// to the store once they are.
type batch struct {
	items []blobs.Blob
	size  int
	added *int
	bytes *int64
}

// batcher returns the batches of a save over b counting in st, nil if b
// is no Batcher.
func batcher(b blobs.Store, st *SaveStats) *batches {
	bb, ok := b.(blobs.Batcher)
	if !ok {
		return nil
	}
	return &batches{to: bb,
		files: batch{added: &st.Uploaded, bytes: &st.UploadedBytes},
		trees: batch{added: &st.TreesUploaded, bytes: &st.TreeBytes}}
}

// addFile batches the blob of a file's data.
func (s *saver) addFile(d string, data []byte) error { return s.add(&s.batch.files, d, data) }

// addTree batches the blob of a tree.
func (s *saver) addTree(d string, data []byte) error { return s.add(&s.batch.trees, d, data) }

// add batches a blob, putting the batch first if it would be too large.
func (s *saver) add(b *batch, d string, data []byte) error {
	if b.size+len(data) > blobs.MaxBatch {
		if err := s.putBatch(b); err != nil {
			return err
		}
	}
	b.items = append(b.items, blobs.Blob{Digest: d, Data: data})
	b.size += len(data)
	return nil
}

func (s *saver) putBatch(b *batch) error {
	if len(b.items) == 0 {
		return nil
	}
	n, bytes, err := s.batch.to.PutBatch(s.ctx, s.ns, b.items)
	if err != nil {
		return storeErr(err)
	}
	*b.added += n
	*b.bytes += bytes
	b.items, b.size = nil, 0
	return nil
}

// flush puts what the batches hold: before the ref names any of it.
func (s *saver) flush() error {
	if s.batch == nil {
		return nil
	}
	if err := s.putBatch(&s.batch.files); err != nil {
		return err
	}
	return s.putBatch(&s.batch.trees)
}

// readSmall reads the whole of f, an open file of at most
// blobs.MaxBatchBlob bytes by its stat; ok false if it holds more now (it
// grew: the caller streams it instead).
func readSmall(f *os.File) (data []byte, ok bool, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, false, err
	}
	data, err = io.ReadAll(io.LimitReader(onlyReader{f}, blobs.MaxBatchBlob+1))
	if err != nil {
		return nil, false, err
	}
	return data, len(data) <= blobs.MaxBatchBlob, nil
}

package workspace

import (
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/blobs"
)

// batches hold the small blobs a save puts when its store is a
// blobs.Batcher (a database, where each Put is a round trip and a
// transaction): files and trees apart, so that each is counted as its
// own kind. They are put when full and before the ref is set.
type batches struct {
	to           blobs.Batcher
	files, trees batch
}

type batch struct {
	items []blobs.Blob
	bytes int
}

// batcher returns the save's batches over b, nil if b is no Batcher.
func batcher(b blobs.Store) *batches {
	if bb, ok := b.(blobs.Batcher); ok {
		return &batches{to: bb}
	}
	return nil
}

// addFile batches the blob of a file's data, putting the batch first if
// it would be too large.
func (s *saver) addFile(d string, data []byte) error {
	return s.add(&s.batch.files, d, data, func(n int, bytes int64) {
		s.stats.Uploaded += n
		s.stats.UploadedBytes += bytes
	})
}

// addTree batches the blob of a tree.
func (s *saver) addTree(d string, data []byte) error {
	return s.add(&s.batch.trees, d, data, func(n int, bytes int64) {
		s.stats.TreesUploaded += n
		s.stats.TreeBytes += bytes
	})
}

func (s *saver) add(b *batch, d string, data []byte, count func(int, int64)) error {
	if b.bytes+len(data) > blobs.MaxBatch {
		if err := s.putBatch(b, count); err != nil {
			return err
		}
	}
	b.items = append(b.items, blobs.Blob{Digest: d, Data: data})
	b.bytes += len(data)
	return nil
}

func (s *saver) putBatch(b *batch, count func(int, int64)) error {
	if len(b.items) == 0 {
		return nil
	}
	n, bytes, err := s.batch.to.PutBatch(s.ctx, s.ns, b.items)
	if err != nil {
		return storeErr(err)
	}
	count(n, bytes)
	b.items, b.bytes = nil, 0
	return nil
}

// flush puts what the batches hold: before the ref names any of it.
func (s *saver) flush() error {
	if s.batch == nil {
		return nil
	}
	if err := s.putBatch(&s.batch.files, func(n int, bytes int64) {
		s.stats.Uploaded += n
		s.stats.UploadedBytes += bytes
	}); err != nil {
		return err
	}
	return s.putBatch(&s.batch.trees, func(n int, bytes int64) {
		s.stats.TreesUploaded += n
		s.stats.TreeBytes += bytes
	})
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

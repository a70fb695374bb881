package blobstest

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
)

// testBatch runs on a store with the Batcher ability: a batch stores
// each of its blobs whole, the empty one and a repeated one once, counts
// only those the namespace lacked, and a batch with one wrong digest or
// an oversized blob stores nothing.
func testBatch(t *testing.T, s blobs.Store) {
	b, ok := s.(blobs.Batcher)
	if !ok {
		t.Skip("the store has no batches (blobs.Batcher)")
	}
	ns := "job_batch"
	held := put(t, s, ns, []byte("already here"))
	small := [][]byte{{}, []byte("one"), []byte("two"), data(7, blobs.MaxBatchBlob), []byte("one")}
	batch := []blobs.Blob{{Digest: held, Data: []byte("already here")}}
	want := int64(0)
	for i, d := range small {
		batch = append(batch, blobs.Blob{Digest: blobs.Digest(d), Data: d})
		if i < 4 {
			want += int64(len(d))
		}
	}
	added, n, err := b.PutBatch(t.Context(), ns, batch)
	if err != nil || added != 4 || n != want {
		t.Fatalf("PutBatch = %d blobs, %d bytes, %v; want 4 new (the held and the repeated one not), %d bytes", added, n, err, want)
	}
	for _, d := range small {
		if got := read(t, s, ns, blobs.Digest(d)); !bytes.Equal(got, d) {
			t.Errorf("blob of %d bytes read back as %d bytes", len(d), len(got))
		}
	}
	if added, _, err := b.PutBatch(t.Context(), ns, batch); err != nil || added != 0 {
		t.Errorf("the same batch again = %d new, %v; want 0", added, err)
	}
	bad := []blobs.Blob{{Digest: blobs.Digest([]byte("x")), Data: []byte("x")}, {Digest: blobs.Digest([]byte("y")), Data: []byte("not y")}}
	if _, _, err := b.PutBatch(t.Context(), ns, bad); !errors.Is(err, blobs.ErrCorrupt) {
		t.Errorf("a batch with a wrong digest: %v, want ErrCorrupt", err)
	}
	if has(t, s, ns, blobs.Digest([]byte("x"))) {
		t.Errorf("a refused batch stored its good blob")
	}
	big := data(8, blobs.MaxBatchBlob+1)
	if _, _, err := b.PutBatch(t.Context(), ns, []blobs.Blob{{Digest: blobs.Digest(big), Data: big}}); err == nil || has(t, s, ns, blobs.Digest(big)) {
		t.Errorf("a blob over MaxBatchBlob in a batch: %v", err)
	}
	if _, _, err := b.PutBatch(t.Context(), "../x", batch[:1]); err == nil {
		t.Errorf("a batch into namespace ../x was taken")
	}
}

// testBatchConcurrent: checkpoints of one job at once (a worker's and an
// API replica's, or two steps') put the same small blobs, some by Put and
// some in batches, in opposite orders: all succeed, and each blob is
// whole. Then the namespace is removed while they run again: whatever Has
// reports afterwards reads back whole.
func testBatchConcurrent(t *testing.T, s blobs.Store) {
	b, ok := s.(blobs.Batcher)
	if !ok {
		t.Skip("the store has no batches (blobs.Batcher)")
	}
	const ns, n, workers = "job_race", 40, 6
	bs := make([]blobs.Blob, n)
	for i := range bs {
		d := data(uint64(100+i), 1+i*97)
		bs[i] = blobs.Blob{Digest: blobs.Digest(d), Data: d}
	}
	race := func(remove bool) error {
		errs := make([]error, workers+1)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				order := slices.Clone(bs)
				if w%2 == 1 {
					slices.Reverse(order)
				}
				if w%3 == 0 {
					_, _, errs[w] = b.PutBatch(t.Context(), ns, order)
					return
				}
				for _, x := range order {
					if err := s.Put(t.Context(), ns, x.Digest, int64(len(x.Data)), bytes.NewReader(x.Data)); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		if remove {
			wg.Go(func() { errs[workers] = s.Remove(t.Context(), ns) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := race(false); err != nil {
		t.Fatalf("Puts and batches of the same blobs at once: %v", err)
	}
	for _, x := range bs {
		if got := read(t, s, ns, x.Digest); !bytes.Equal(got, x.Data) {
			t.Fatalf("blob of %d bytes read back as %d", len(x.Data), len(got))
		}
	}
	_ = race(true) // a Put that finds its namespace removed under it may fail
	for _, x := range bs {
		if has(t, s, ns, x.Digest) {
			if got := read(t, s, ns, x.Digest); !bytes.Equal(got, x.Data) {
				t.Fatalf("after a Remove under way, blob of %d bytes read back as %d", len(x.Data), len(got))
			}
		}
	}
}

package pgblobs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/blobs"
)

// Open reads the blob's row; the reader it returns reads one chunk at a
// time, each in a query of its own under ctx, so a slow reader holds no
// connection and at most one chunk in memory.
func (s *Store) Open(ctx context.Context, ns, digest string) (io.ReadCloser, int64, error) {
	if err := checkBlob(ns, digest); err != nil {
		return nil, 0, err
	}
	r := &reader{ctx: ctx, store: s, ns: ns, digest: digest}
	var size int64
	const q = "SELECT size, chunks FROM blob_objects WHERE ns = $1 AND digest = $2"
	err := s.pool.QueryRow(ctx, q, ns, digest).Scan(&size, &r.chunks)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, fmt.Errorf("blob %s of %s: %w", digest, ns, blobs.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s of %s: %w", digest, ns, err)
	}
	return r, size, nil
}

// reader reads a blob's chunks in order.
type reader struct {
	ctx        context.Context // Open's: the reads are part of that call
	store      *Store
	ns, digest string
	chunks     int    // of the blob
	next       int    // the seq of the chunk to fetch next
	buf        []byte // what is left of the chunk fetched last
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next == r.chunks {
			return 0, io.EOF
		}
		if err := r.fetch(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// fetch reads chunk r.next into r.buf. A chunk gone is a namespace
// removed while read.
func (r *reader) fetch() error {
	const q = "SELECT data FROM blob_chunks WHERE ns = $1 AND digest = $2 AND seq = $3"
	err := r.store.pool.QueryRow(r.ctx, q, r.ns, r.digest, r.next).Scan(&r.buf)
	if errors.Is(err, pgx.ErrNoRows) {
		err = blobs.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("blob %s of %s, chunk %d: %w", r.digest, r.ns, r.next, err)
	}
	r.next++
	return nil
}

// Close ends the reads; the reader holds no connection between them.
func (r *reader) Close() error {
	r.next, r.buf = r.chunks, nil
	return nil
}

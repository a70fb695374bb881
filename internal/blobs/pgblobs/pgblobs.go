// Package pgblobs keeps blobs in the PostgreSQL database of the job store
// (AGENTBOX_BLOBS=postgres, the default in cluster mode), so a cluster
// shares its checkpoints without a shared directory.
//
// The tables are the job store's migration 0004_blobs.sql
// (internal/store/postgres): a blob's bytes are rows of blob_chunks of
// at most 1 MiB, so neither Put nor Open holds a large blob in memory;
// its blob_objects row is inserted in the transaction of its chunks once
// they were verified, so Has and Open see a blob whole or not at all.
// Concurrent Puts of one blob wait on each other's chunk rows and insert
// nothing twice (ON CONFLICT DO NOTHING). Refs are rows of blob_refs.
//
// Durability is at the ref, as in dirblobs: a Put commits without waiting
// for the WAL flush (synchronous_commit off), SetRef waits for it, and a
// ref is only set once what it names was put.
package pgblobs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/blobs"
)

// chunkSize is the most bytes a row of blob_chunks holds.
const chunkSize = 1 << 20

// Store is a blobs.Store in a PostgreSQL database. It is safe for
// concurrent use, also by many processes on the same database.
type Store struct{ pool *pgxpool.Pool }

var _ blobs.Store = (*Store)(nil)

// New returns the store over pool, a database the job store migrated
// (postgres.Open; its Store.Pool). The caller closes pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

func checkBlob(ns, digest string) error {
	return errors.Join(blobs.CheckNS(ns), blobs.CheckDigest(digest))
}

func checkRef(ns, name string) error {
	return errors.Join(blobs.CheckNS(ns), blobs.CheckRef(name))
}

// Has reports whether the blob's row is there.
func (s *Store) Has(ctx context.Context, ns, digest string) (bool, error) {
	if err := checkBlob(ns, digest); err != nil {
		return false, err
	}
	var ok bool
	const q = "SELECT EXISTS (SELECT 1 FROM blob_objects WHERE ns = $1 AND digest = $2)"
	if err := s.pool.QueryRow(ctx, q, ns, digest).Scan(&ok); err != nil {
		return false, fmt.Errorf("blob %s of %s: %w", digest, ns, err)
	}
	return ok, nil
}

// Put writes the blob's chunks as it reads and verifies them, then its
// row, in one transaction: a failure or a canceled ctx rolls it all back.
func (s *Store) Put(ctx context.Context, ns, digest string, size int64, r io.Reader) error {
	if ok, err := s.Has(ctx, ns, digest); err != nil || ok {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("put %s: %w", digest, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, lockShared, ns); err != nil {
		return fmt.Errorf("put %s: %w", digest, err)
	}
	// A blob need not be durable on its own: nothing names it until a ref
	// does, and SetRef commits synchronously, which flushes the WAL of
	// every transaction before it. A checkpoint of thousands of files
	// waits for one flush, not one each.
	_, err = tx.Exec(ctx, "SET LOCAL synchronous_commit = off")
	var chunks int
	if err == nil {
		chunks, err = putChunks(ctx, tx, ns, digest, blobs.NewVerifier(r, digest, size))
	}
	if err == nil {
		err = putObject(ctx, tx, ns, digest, size, chunks)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", digest, err)
	}
	return nil
}

// putChunks inserts the chunks v gives, one buffer at a time, and returns
// how many there are once v checked them.
func putChunks(ctx context.Context, tx pgx.Tx, ns, digest string, v *blobs.Verifier) (int, error) {
	const q = `INSERT INTO blob_chunks (ns, digest, seq, data) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING`
	buf := make([]byte, chunkSize)
	for seq := 0; ; seq++ {
		n, err := io.ReadFull(v, buf)
		switch {
		case errors.Is(err, io.EOF): // nothing more (n is 0)
			return seq, v.Check()
		case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
			return 0, err
		}
		if _, err := tx.Exec(ctx, q, ns, digest, seq, buf[:n]); err != nil {
			return 0, err
		}
		if n < len(buf) { // the last chunk
			return seq + 1, v.Check()
		}
	}
}

// putObject inserts the blob's row, unless a concurrent Put did. A chunk
// that such a Put wrote (ours conflicted) may have been removed since,
// with its namespace: then the blob is not whole, and not made visible.
func putObject(ctx context.Context, tx pgx.Tx, ns, digest string, size int64, chunks int) error {
	var have int
	const count = "SELECT COUNT(*) FROM blob_chunks WHERE ns = $1 AND digest = $2"
	if err := tx.QueryRow(ctx, count, ns, digest).Scan(&have); err != nil {
		return err
	}
	if have != chunks {
		return fmt.Errorf("%d chunks of %d: namespace %s removed while put", have, chunks, ns)
	}
	const q = `INSERT INTO blob_objects (ns, digest, size, chunks) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING`
	_, err := tx.Exec(ctx, q, ns, digest, size, chunks)
	return err
}

// SetRef inserts or replaces the ref's row.
func (s *Store) SetRef(ctx context.Context, ns, name string, value []byte) error {
	if err := checkRef(ns, name); err != nil {
		return err
	}
	if len(value) > blobs.MaxRef {
		return fmt.Errorf("ref %s: %d bytes, over %d", name, len(value), blobs.MaxRef)
	}
	if value == nil {
		value = []byte{} // bytea, not NULL
	}
	const q = `INSERT INTO blob_refs (ns, name, value) VALUES ($1, $2, $3)
ON CONFLICT (ns, name) DO UPDATE SET value = EXCLUDED.value`
	if _, err := s.pool.Exec(ctx, q, ns, name, value); err != nil {
		return fmt.Errorf("set ref %s of %s: %w", name, ns, err)
	}
	return nil
}

// Ref reads the ref's row.
func (s *Store) Ref(ctx context.Context, ns, name string) ([]byte, error) {
	if err := checkRef(ns, name); err != nil {
		return nil, err
	}
	var v []byte
	const q = "SELECT value FROM blob_refs WHERE ns = $1 AND name = $2"
	err := s.pool.QueryRow(ctx, q, ns, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("ref %s of %s: %w", name, ns, blobs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ref %s of %s: %w", name, ns, err)
	}
	return v, nil
}

// Remove deletes the namespace's rows of the three tables in one
// statement.
func (s *Store) Remove(ctx context.Context, ns string) error {
	if err := blobs.CheckNS(ns); err != nil {
		return err
	}
	const q = `WITH objects AS (DELETE FROM blob_objects WHERE ns = $1),
chunks AS (DELETE FROM blob_chunks WHERE ns = $1)
DELETE FROM blob_refs WHERE ns = $1`
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockExclusive, ns); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q, ns)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", ns, err)
	}
	return nil
}

// The namespace's lock: puts hold it shared and Remove exclusive, each
// until its transaction ends. A put checks that a chunk it did not write
// itself (another put's) is there, then adds the blob's row; without the
// lock a Remove could delete that chunk in between, leaving a row without
// its bytes. The lock's class ("blob") keeps it apart from other advisory
// locks on the database (migrations').
const (
	lockShared    = "SELECT pg_advisory_xact_lock_shared(1651273570, hashtext($1))"
	lockExclusive = "SELECT pg_advisory_xact_lock(1651273570, hashtext($1))"
)

// List returns the namespaces that hold a blob or a ref.
func (s *Store) List(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT ns FROM blob_objects UNION SELECT ns FROM blob_refs")
	if err == nil {
		var ns []string
		if ns, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			return ns, nil
		}
	}
	return nil, fmt.Errorf("list blob namespaces: %w", err)
}

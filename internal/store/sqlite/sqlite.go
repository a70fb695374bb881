// Package sqlite is the embedded store.Store: one SQLite file in WAL mode,
// through the pure-Go driver modernc.org/sqlite (no cgo).
//
// Writes go through a single connection, so writers in this process queue in
// Go instead of meeting SQLITE_BUSY; every read-modify-write runs in a
// BEGIN IMMEDIATE transaction, which also serializes writers in other
// processes sharing the file. Reads use a separate pool of connections that
// WAL lets run alongside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

var _ store.Store = (*Store)(nil)

// Sync is SQLite's synchronous setting: how hard a commit waits for the disk.
type Sync string

const (
	// SyncFull fsyncs the log on every commit: a commit survives power loss.
	SyncFull Sync = "FULL"
	// SyncNormal skips that fsync: a commit survives a crash of the process
	// (kill -9) but the last ones may be lost on power loss or an OS crash.
	SyncNormal Sync = "NORMAL"
)

// Options tune a Store; the zero value is the durable default.
type Options struct {
	// Synchronous is SyncFull (the default) or SyncNormal.
	Synchronous Sync
	// BusyTimeout is how long a write waits for another process holding
	// the database's write lock. Default 10s.
	BusyTimeout time.Duration
	// ReadConns bounds the read pool. Default 2×GOMAXPROCS, at least 4.
	ReadConns int
}

func (o Options) withDefaults() (Options, error) {
	switch o.Synchronous {
	case "":
		o.Synchronous = SyncFull
	case SyncFull, SyncNormal:
	default:
		return o, fmt.Errorf("synchronous must be %s or %s, not %q", SyncFull, SyncNormal, o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, 2*runtime.GOMAXPROCS(0))
	}
	return o, nil
}

// Store is a store.Store in one SQLite file. It is safe for concurrent use,
// also by several processes on the same file.
type Store struct {
	path  string
	w     *sql.DB // one connection: all writes
	r     *sql.DB // read pool
	stmts stmts
	once  sync.Once
	err   error
}

// Open opens (creating if needed) the database at path and migrates it to
// this binary's schema. It fails with ErrSchemaTooNew if the file was
// written by a newer agentbox.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{path: abs}
	if err := s.open(ctx, opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, opts Options) error {
	var err error
	if s.w, err = sql.Open("sqlite", dsn(s.path, opts, true)); err != nil {
		return err
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	if err := checkWAL(ctx, s.w); err != nil {
		return err
	}
	if err := migrate(ctx, s.w); err != nil {
		return err
	}
	if s.r, err = sql.Open("sqlite", dsn(s.path, opts, false)); err != nil {
		return err
	}
	s.r.SetMaxOpenConns(opts.ReadConns)
	s.r.SetMaxIdleConns(opts.ReadConns)
	return s.stmts.prepare(ctx, s.w, s.r)
}

// dsn is the connection string of the writer or of a reader.
func dsn(path string, opts Options, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+string(opts.Synchronous)+")")
		q.Set("_txlock", "immediate")
	} else {
		q.Set("_query_only", "1")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// checkWAL fails unless the database really is in WAL mode (some file
// systems cannot do it), since concurrent readers depend on it.
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	return nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// Close closes both pools. Calls after the first return its result.
func (s *Store) Close() error {
	s.once.Do(func() {
		var errs []error
		errs = append(errs, s.stmts.close())
		for _, db := range []*sql.DB{s.r, s.w} {
			if db != nil {
				errs = append(errs, db.Close())
			}
		}
		if err := errors.Join(errs...); err != nil {
			s.err = fmt.Errorf("close store: %w", err)
		}
	})
	return s.err
}

// write runs fn in a BEGIN IMMEDIATE transaction on the writer and commits
// it; an error from fn rolls back and is returned as is.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

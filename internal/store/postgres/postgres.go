// Package postgres is the store.Store several agentbox processes share: a
// PostgreSQL database reached through pgx v5's pool. It keeps the SQLite
// store's schema and semantics (internal/store/sqlstore holds what they
// share) and passes the same storetest suite.
//
// Concurrency is the database's: every read-modify-write locks the job's
// row (SELECT … FOR UPDATE) in a READ COMMITTED transaction, claims skip
// rows another claimer holds (FOR UPDATE SKIP LOCKED), and an event takes
// the next seq by incrementing the job's last_seq in the same statement
// that inserts it. Migrations run under an advisory lock, so replicas
// starting at once apply each one once.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Options tune a Store; the zero value is the default.
type Options struct {
	// MaxConns bounds the connection pool. Default 4×GOMAXPROCS, at least 8.
	MaxConns int32
	// Log is where the notifier says it lost and regained its
	// connection; nil discards it.
	Log *slog.Logger
}

// Store is a store.Store in a PostgreSQL database. It is safe for
// concurrent use, also by many processes on the same database.
type Store struct {
	pool     *pgxpool.Pool
	url      string // redacted
	notifier *Notifier
	once     sync.Once
}

// Open connects to the database at url (postgres://… or postgresql://…)
// and migrates it to this binary's schema. It fails with ErrSchemaTooNew
// if a newer agentbox migrated the database. Errors never show the URL's
// password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open store %s: bad URL", Redact(url))
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	s := &Store{url: Redact(url)}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("open store %s: %w", s.url, err)
	}
	if err := migrate(ctx, s.pool); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("open store %s: %w", s.url, err)
	}
	s.notifier = NewNotifier(url, opts.Log)
	return s, nil
}

// Subscribe delivers the notes of every process sharing the database: a
// job made pending, an event appended (see Notifier). The store is a
// store.Notifier.
func (s *Store) Subscribe(ctx context.Context) (<-chan store.Note, error) {
	return s.notifier.Subscribe(ctx)
}

// Redact is a database URL with its passwords (the user's, and the
// password and sslpassword parameters libpq also takes) replaced by
// "xxxxx", fit for logs; a string that is not a URL comes back as
// "(unparsable URL)".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	params := strings.Split(u.RawQuery, "&")
	for i, p := range params {
		k, _, _ := strings.Cut(p, "=")
		if name, err := url.QueryUnescape(k); err != nil || secretParams[name] {
			params[i] = k + "=xxxxx"
		}
	}
	u.RawQuery = strings.Join(params, "&")
	return u.Redacted()
}

// secretParams are the connection parameters that hold passwords.
var secretParams = map[string]bool{"password": true, "sslpassword": true}

// URL is the store's database URL without its password.
func (s *Store) URL() string { return s.url }

// Pool is the store's connection pool, for what shares its database (the
// notifier, tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool, waiting for connections in use. Calls after the
// first do nothing.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		err = s.notifier.Close()
		s.pool.Close()
	})
	return err
}

// write runs fn in a transaction and commits it; an error from fn rolls
// back and is returned as is.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// dbErr maps what PostgreSQL answered to the store's errors: no row is
// store.ErrNotFound; text it cannot store or compare (a NUL byte, invalid
// UTF-8, in a task, a query or an ID a client sent) is store.ErrInvalid,
// the client's mistake, where SQLite stores or finds nothing.
func dbErr(err error) error {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05"):
		return fmt.Errorf("%w: text with a NUL byte or not UTF-8: %v", store.ErrInvalid, pe.Message)
	}
	return err
}

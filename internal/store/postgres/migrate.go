package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaTooNew means the database was migrated by a newer agentbox than
// this one; using it could corrupt data the newer schema relies on.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// migrateLock is the advisory lock key migrations hold ("agentbox" in
// ASCII), so openers on several hosts migrate one after another.
const migrateLock int64 = 0x6167656e74626f78

// migration is one file of migrations/, named NNNN_what.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order; versions run 1, 2, …
// without gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, name := range names { // Glob sorts
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want the name %04d_what.sql", name, i+1)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	return ms, nil
}

// migrate brings the database to the newest embedded version in one
// transaction holding migrateLock: concurrent openers apply each migration
// once, and a failure leaves the schema as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return migrateTo(ctx, pool, ms)
}

func migrateTo(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := applyMigrations(ctx, tx, ms); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func applyMigrations(ctx context.Context, tx pgx.Tx, ms []migration) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at BIGINT  NOT NULL
)`
	if _, err := tx.Exec(ctx, create); err != nil {
		return err
	}
	var cur int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w (version %d, this binary knows up to %d): upgrade agentbox",
			ErrSchemaTooNew, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		const record = "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)"
		if _, err := tx.Exec(ctx, record, m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

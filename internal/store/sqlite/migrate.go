package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaTooNew means the database was migrated by a newer agentbox than
// this one; opening it could corrupt data the newer schema relies on.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

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
		m, err := readMigration(name)
		if err != nil {
			return nil, err
		}
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", name, m.version, i+1)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func readMigration(name string) (migration, error) {
	base := path.Base(name)
	num, _, ok := strings.Cut(base, "_")
	v, err := strconv.Atoi(num)
	if !ok || err != nil {
		return migration{}, fmt.Errorf("migration %s: name must be NNNN_what.sql", name)
	}
	b, err := migrationFiles.ReadFile(name)
	if err != nil {
		return migration{}, err
	}
	return migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)}, nil
}

// migrate brings the database to the newest embedded version in one
// BEGIN IMMEDIATE transaction, so concurrent openers in several processes
// apply each migration once and a failure leaves the schema as it was.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if err := applyMigrations(ctx, tx, ms); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func applyMigrations(ctx context.Context, tx *sql.Tx, ms []migration) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`
	if _, err := tx.ExecContext(ctx, create); err != nil {
		return err
	}
	cur, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w (version %d, this binary knows up to %d): upgrade agentbox",
			ErrSchemaTooNew, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		const record = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"
		if _, err := tx.ExecContext(ctx, record, m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// schemaVersion is the newest applied migration, 0 for a new database.
func schemaVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v)
	return v, err
}

package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	storetest.Run(t, func(t *testing.T, name string) store.Store {
		return open(t, filepath.Join(dir, name+".db"), sqlite.Options{})
	})
}

func TestConformanceSyncNormal(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	storetest.Run(t, func(t *testing.T, name string) store.Store {
		return open(t, filepath.Join(dir, name+".db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	})
}

// open opens the store at path; the caller closes it.
func open(tb testing.TB, path string, opts sqlite.Options) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

// openClosed opens the store at path and closes it when tb ends.
func openClosed(tb testing.TB, path string, opts sqlite.Options) *sqlite.Store {
	s := open(tb, path, opts)
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	for i := range 3 { // a fresh database, then reopened: idempotent
		s := open(t, path, sqlite.Options{})
		if err := s.Close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	db := rawDB(t, path)
	var versions, tables int
	if err := db.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&versions); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('jobs', 'events')"
	if err := db.QueryRow(q).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	want, err := sqlite.MigrationCount()
	if err != nil {
		t.Fatal(err)
	}
	if versions != want || tables != 2 {
		t.Errorf("after three opens: %d migrations recorded, %d tables; want %d and 2", versions, tables, want)
	}
}

func TestMigrationsRefuseNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	open(t, path, sqlite.Options{}).Close()
	db := rawDB(t, path)
	if _, err := db.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrSchemaTooNew", err)
	}
	t.Logf("error: %v", err)
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name     string
		opts     sqlite.Options
		wantErr  bool
		wantSync string // PRAGMA synchronous: 2 FULL, 1 NORMAL
	}{
		{"default", sqlite.Options{}, false, "2"},
		{"full", sqlite.Options{Synchronous: sqlite.SyncFull}, false, "2"},
		{"normal", sqlite.Options{Synchronous: sqlite.SyncNormal}, false, "1"},
		{"bad sync", sqlite.Options{Synchronous: "OFF"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "o.db"), tc.opts)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Open: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer s.Close()
			want := map[string]string{"synchronous": tc.wantSync, "journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000"}
			for name, v := range want {
				if got, err := sqlite.WriterPragma(s, name); err != nil || got != v {
					t.Errorf("PRAGMA %s = %q, %v; want %q", name, got, err, v)
				}
			}
		})
	}
}

// rawDB opens path with the plain driver, closed when t ends.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

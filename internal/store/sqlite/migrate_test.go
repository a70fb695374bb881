package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// TestMigrateDeletedAt opens a database an agentbox before deleted_at left
// (schema version 2, with a job and its log) and uses the new column.
func TestMigrateDeletedAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db := rawDB(t, path)
	if err := sqlite.MigrateTo(t.Context(), db, 2); err != nil {
		t.Fatalf("schema version 2: %v", err)
	}
	ended := time.Now().Add(-8 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
	const insert = `INSERT INTO jobs (id, created_at, task, status, steps, started_at, ended_at, limit_context_window)
VALUES ('old', ?, 'an old task', 'complete', 7, ?, ?, 4096)`
	if _, err := db.Exec(insert, ended.Add(-time.Hour).UnixNano(), ended.Add(-time.Minute).UnixNano(), ended.UnixNano()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO events (job_id, seq, time, type, payload) VALUES ('old', 1, 1, 'state', '{"status":"complete"}')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openClosed(t, path, sqlite.Options{})
	j, err := s.GetJob(t.Context(), "old")
	if err != nil {
		t.Fatalf("GetJob after the migration: %v", err)
	}
	if !j.DeletedAt.IsZero() || j.Steps != 7 || j.Limits.ContextWindow != 4096 || !j.EndedAt.Equal(ended) {
		t.Errorf("migrated job: deleted %v, steps %d, window %d, ended %v", j.DeletedAt, j.Steps, j.Limits.ContextWindow, j.EndedAt)
	}
	if got, err := s.EndedBefore(t.Context(), time.Now().Add(-7*24*time.Hour), 10); err != nil || len(got) != 1 {
		t.Errorf("EndedBefore after the migration = %d jobs, %v; want the old one", len(got), err)
	}
	del := time.Now().UTC()
	if _, err := s.UpdateJob(t.Context(), "old", func(j *store.Job) error { j.DeletedAt = del; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetJob(t.Context(), "old"); got.DeletedAt.Sub(del).Abs() > time.Microsecond {
		t.Errorf("DeletedAt = %v, want %v", got.DeletedAt, del)
	}
	if evs, err := s.Events(t.Context(), "old", 0, 10); err != nil || len(evs) != 1 {
		t.Errorf("events after the migration: %d, %v; want 1", len(evs), err)
	}
	var v int
	if err := rawDB(t, path).QueryRow("SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if want, _ := sqlite.MigrationCount(); v != want {
		t.Errorf("schema version %d, want %d", v, want)
	}
}

// TestEndedBeforeUsesIndex: the janitor's query reads the partial index,
// not the whole table.
func TestEndedBeforeUsesIndex(t *testing.T) {
	s := openClosed(t, filepath.Join(t.TempDir(), "p.db"), sqlite.Options{})
	plan, err := sqlite.EndedBeforePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "jobs_ended_undeleted") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("query plan does not use the index (or sorts):\n%s", plan)
	}
}

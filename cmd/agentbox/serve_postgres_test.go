package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestServePostgres runs `agentbox serve --store postgres://…` with the
// shell agent: a job runs to the end with its state and events in the
// database, none in the data dir, and the log shows the URL without its
// password (the test server trusts loopback, so any password works).
func TestServePostgres(t *testing.T) {
	t.Parallel()
	url := strings.Replace(testenv.Postgres(t), "postgres://postgres@", "postgres://postgres:s3cret-pw@", 1)
	if !strings.Contains(url, "s3cret-pw") {
		t.Fatalf("unexpected test URL %s", url)
	}
	s := newServer(t)
	s.args = []string{"--store", url}
	s.start()
	id, code := s.submit("echo hi")
	if code != 201 || id == "" {
		t.Fatalf("submit: %d %q\n%s", code, id, s.logs)
	}
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	db, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(t.Context())
	var status string
	var events int
	q := "SELECT status, (SELECT COUNT(*) FROM events WHERE job_id = $1) FROM jobs WHERE id = $1"
	if err := db.QueryRow(t.Context(), q, id).Scan(&status, &events); err != nil || status != "complete" || events == 0 {
		t.Errorf("in the database: job %s status %q with %d events, %v", id, status, events, err)
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "agentbox.db")); !os.IsNotExist(err) {
		t.Errorf("agentbox.db in the data dir: %v", err)
	}
	logs := s.logs.String()
	if strings.Contains(logs, "s3cret-pw") || !strings.Contains(logs, "postgres:xxxxx@") {
		t.Errorf("the log shows the password, or no store URL:\n%s", logs)
	}
}

package postgres_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/store/storetest"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	urls := map[string]string{} // storetest's names: reopened, the same database
	storetest.Run(t, func(t *testing.T, name string) store.Store {
		mu.Lock()
		u, ok := urls[name]
		mu.Unlock()
		if !ok {
			u = testenv.Postgres(t)
			mu.Lock()
			urls[name] = u
			mu.Unlock()
		}
		return open(t, u)
	})
}

// open opens the store at url; the caller closes it.
func open(tb testing.TB, url string) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s
}

// TestEndsAJobWhoseResultIsNotText: a job's result and error carry what
// the model and the sandbox said, which may hold a NUL or bytes that are
// not UTF-8; PostgreSQL's text takes neither, and the job must still end
// (else its lease expires and it runs again).
func TestEndsAJobWhoseResultIsNotText(t *testing.T) {
	s := open(t, testenv.Postgres(t))
	defer s.Close()
	if _, _, err := s.CreateJob(t.Context(), store.Job{ID: "j1", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	j, err := s.UpdateJob(t.Context(), "j1", func(j *store.Job) error {
		j.Status, j.Result, j.Error = store.StatusError, "a\x00b", "c\xffd"
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	got, err := s.GetJob(t.Context(), "j1")
	if err != nil || got.Status != store.StatusError || got.Result != "a\uFFFDb" || got.Error != "c\uFFFDd" || got.Result != j.Result || got.Error != j.Error {
		t.Fatalf("stored %q %q %q, returned %q %q (%v); want the text with U+FFFD in place of what is not", got.Status, got.Result, got.Error, j.Result, j.Error, err)
	}
}

// TestRefusesTextItCannotStore: a client's text PostgreSQL cannot hold or
// compare (a NUL byte, invalid UTF-8) is the client's mistake
// (store.ErrInvalid, a 400), not the server's (a 500).
func TestRefusesTextItCannotStore(t *testing.T) {
	s := open(t, testenv.Postgres(t))
	defer s.Close()
	ctx := t.Context()
	for name, err := range map[string]error{
		"a task with NUL": func() error { _, _, err := s.CreateJob(ctx, store.Job{ID: "j1", Task: "a\x00b"}); return err }(),
		"an id with NUL":  func() error { _, err := s.GetJob(ctx, "j\x00"); return err }(),
		"a query not UTF-8": func() error {
			_, err := s.ListJobs(ctx, store.ListOptions{Query: "\xff"})
			return err
		}(),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want store.ErrInvalid", name, err)
		}
	}
}

package postgres_test

import (
	"context"
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

package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/pgserver"
)

// A real PostgreSQL server for the tests: Debian's postgresql, started
// once per test binary in a temporary directory as the unprivileged
// postgres user (internal/pgserver), listening on a loopback port, with
// durability off. Each Postgres call gets a database of its own on it. A
// server a killed run left behind is stopped by the next run.

// pgPrefix names the temporary directories of the test servers.
const pgPrefix = "agentbox-pgtest-"

var pg struct {
	once sync.Once
	srv  *pgserver.Server
	err  error
}

// PostgresRequired reports whether a missing PostgreSQL must fail tests:
// where Docker is required (CI), or with AGENTBOX_REQUIRE_POSTGRES=1.
func PostgresRequired() bool {
	return DockerRequired() || os.Getenv("AGENTBOX_REQUIRE_POSTGRES") == "1"
}

// Postgres returns the URL of a fresh, empty database on the tests' server,
// starting the server if this binary has none yet. Without PostgreSQL the
// test skips (fails where it is required). The database is dropped when
// the test ends. AGENTBOX_TEST_POSTGRES, a URL of a server the tests may
// create databases on, is used instead of starting one.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("AGENTBOX_TEST_POSTGRES")
	if admin == "" {
		pg.once.Do(func() {
			pgserver.ReapStale(os.TempDir(), pgPrefix)
			pg.srv, pg.err = pgserver.Start("", pgPrefix, pgserver.Options{})
		})
		if pg.err != nil {
			why := "postgres: " + pg.err.Error()
			if PostgresRequired() {
				t.Fatalf("%s (PostgreSQL is required here: CI=true, AGENTBOX_REQUIRE_DOCKER=1 or AGENTBOX_REQUIRE_POSTGRES=1)", why)
			}
			t.Skipf("skipping: needs PostgreSQL (apt-get install postgresql): %s", why)
		}
		admin = pg.srv.URL("postgres")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgserver.Exec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = pgserver.Exec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("AGENTBOX_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// StopPostgres stops the tests' server, if this binary started one, and
// removes its directory. A test binary's TestMain calls it after m.Run.
func StopPostgres() {
	if pg.srv != nil {
		pg.srv.Stop()
		pg.srv = nil
	}
}

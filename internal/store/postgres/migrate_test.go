package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestMigrationsConcurrent opens one empty database from several stores at
// once, as replicas starting together would: every Open succeeds and each
// migration is applied once.
func TestMigrationsConcurrent(t *testing.T) {
	url := testenv.Postgres(t)
	const openers = 4
	var wg sync.WaitGroup
	errs := make([]error, openers)
	for i := range openers {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), url, postgres.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Open: %v", err)
	}
	open(t, url).Close() // and once more, on a migrated database
	db := rawDB(t, url)
	var versions, distinct, tables int
	q := "SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations"
	if err := db.QueryRow(t.Context(), q).Scan(&versions, &distinct); err != nil {
		t.Fatal(err)
	}
	q = "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ('jobs', 'events')"
	if err := db.QueryRow(t.Context(), q).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if want := postgres.MigrationCount(t); versions != want || distinct != want || tables != 2 {
		t.Errorf("after %d concurrent opens: %d migrations recorded (%d distinct), %d tables; want %d and 2",
			openers, versions, distinct, tables, want)
	}
}

func TestMigrationsRefuseNewerSchema(t *testing.T) {
	url := testenv.Postgres(t)
	open(t, url).Close()
	const future = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)"
	if _, err := rawDB(t, url).Exec(t.Context(), future); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(t.Context(), url, postgres.Options{})
	if !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrSchemaTooNew", err)
	}
}

// TestOpenHidesPassword fails to connect with a password in the URL: the
// error names the database without it.
func TestOpenHidesPassword(t *testing.T) {
	for _, url := range []string{
		"postgres://agentbox:s3cret-pw@127.0.0.1:1/agentbox?connect_timeout=1",
		"postgres://agentbox:s3cret-pw@127.0.0.1:1/agentbox?sslmode=bogus",
		"postgres://agentbox@127.0.0.1:1/agentbox?connect_timeout=1&password=s3cret-pw",
	} {
		_, err := postgres.Open(t.Context(), url, postgres.Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Open(%s): %v; want an error without the password", postgres.Redact(url), err)
		}
	}
	if got := postgres.Redact("postgresql://u:pw@h:5432/db?sslmode=disable"); strings.Contains(got, "pw@") || !strings.Contains(got, "u:xxxxx@h:5432/db") {
		t.Errorf("Redact = %q", got)
	}
	// libpq's URLs also take the password, and the client key's, as parameters.
	got := postgres.Redact("postgres://u@h/db?sslmode=require&password=s3cret-pw&sslpassword=k3y-pw&application_name=a")
	if strings.Contains(got, "s3cret-pw") || strings.Contains(got, "k3y-pw") || !strings.Contains(got, "u@h/db?sslmode=require&password=xxxxx&sslpassword=xxxxx&application_name=a") {
		t.Errorf("Redact = %q", got)
	}
}

// rawDB connects to url with plain pgx, closed when t ends.
func rawDB(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

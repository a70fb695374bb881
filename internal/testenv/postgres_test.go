package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopPostgres()
	os.Exit(code)
}

// TestPostgres starts the tests' server and gets two databases of their
// own on it.
func TestPostgres(t *testing.T) {
	a, b := Postgres(t), Postgres(t)
	if a == b {
		t.Fatalf("two tests got one database: %s", a)
	}
	for _, u := range []string{a, b} {
		c, err := pgx.Connect(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		var v string
		if err := c.QueryRow(context.Background(), "SHOW server_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		c.Close(context.Background())
		t.Logf("%s: PostgreSQL %s", u, v)
	}
}

package postgres

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestMain stops the tests' PostgreSQL server after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

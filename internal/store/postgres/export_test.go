package postgres

import "testing"

// MigrationCount is the number of embedded migrations: the schema version
// of a database this binary opened.
func MigrationCount(t *testing.T) int {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

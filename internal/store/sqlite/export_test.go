package sqlite

import (
	"context"
	"database/sql"
)

// WriterPragma reads a PRAGMA on s's write connection.
func WriterPragma(s *Store, name string) (string, error) {
	var v string
	err := s.w.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v)
	return v, err
}

// MigrationCount is the number of embedded migrations: the schema version
// of a database this binary opened.
func MigrationCount() (int, error) {
	ms, err := migrations()
	return len(ms), err
}

// MigrateTo brings db to schema version v only, as an older agentbox
// would have left it.
func MigrateTo(ctx context.Context, db *sql.DB, v int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := applyMigrations(ctx, tx, ms[:v]); err != nil {
		return err
	}
	return tx.Commit()
}

// EndedBeforePlan is SQLite's query plan of EndedBefore's query.
func EndedBeforePlan(s *Store) (string, error) {
	rows, err := s.r.Query("EXPLAIN QUERY PLAN "+endedBeforeSQL, 0, 10)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan += detail + "\n"
	}
	return plan, rows.Err()
}

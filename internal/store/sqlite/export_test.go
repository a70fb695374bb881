package sqlite

import "context"

// WriterPragma reads a PRAGMA on s's write connection.
func WriterPragma(s *Store, name string) (string, error) {
	var v string
	err := s.w.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v)
	return v, err
}

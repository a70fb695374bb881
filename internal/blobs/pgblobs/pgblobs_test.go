package pgblobs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/blobstest"
	"github.com/agentbox/agentbox/internal/blobs/pgblobs"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

// TestConformance runs the suite on a fresh database each, migrated by
// the job store as serve's is.
func TestConformance(t *testing.T) {
	blobstest.Run(t, func(t *testing.T) blobs.Store {
		s, err := postgres.Open(t.Context(), testenv.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatalf("open the job store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return pgblobs.New(s.Pool())
	})
}

// TestChunks: a blob larger than a chunk is rows of at most 1 MiB, and a
// chunk gone (its namespace removed while read) is an error of the read,
// never a short blob.
func TestChunks(t *testing.T) {
	js, err := postgres.Open(t.Context(), testenv.Postgres(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	s, ctx := pgblobs.New(js.Pool()), t.Context()
	b := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16+1) // 5 MiB and 16 bytes
	d := blobs.Digest(b)
	if err := s.Put(ctx, "ns1", d, int64(len(b)), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	var rows, largest int
	const q = "SELECT COUNT(*), MAX(octet_length(data)) FROM blob_chunks WHERE ns = 'ns1' AND digest = $1"
	if err := js.Pool().QueryRow(ctx, q, d).Scan(&rows, &largest); err != nil {
		t.Fatal(err)
	}
	if rows != 6 || largest != 1<<20 {
		t.Errorf("a blob of %d bytes is %d chunks of at most %d bytes; want 6 of 1 MiB", len(b), rows, largest)
	}
	rc, _, err := s.Open(ctx, "ns1", d)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "ns1"); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, rc); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("reading on after Remove: %d bytes, %v; want ErrNotFound", n, err)
	}
}

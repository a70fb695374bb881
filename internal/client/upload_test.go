package client_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/wire"
)

// tarGzOf is a tar.gz of one file.
func tarGzOf(t *testing.T, name string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))})
	tw.Write(body)
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// failingReader gives r, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestSubmitWorkspace: the archive becomes the job's workspace; a job the
// server refuses while a large archive is still being sent gets the
// server's error; an archive that breaks gets its own error, and the
// server keeps nothing of it.
func TestSubmitWorkspace(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL, apitest.Token)
	ctx := t.Context()
	sr, err := c.SubmitWorkspace(ctx, wire.SubmitRequest{Task: "t"}, "", bytes.NewReader(tarGzOf(t, "a.txt", []byte("a"))))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(e.Workspaces.Dir(sr.JobID), "a.txt")); string(b) != "a" || err != nil {
		t.Errorf("a.txt = %q, %v", b, err)
	}
	big := make([]byte, 8<<20) // more than the connection's buffers hold
	rand.Read(big)
	bigTarGz := tarGzOf(t, "big", big)
	_, err = c.SubmitWorkspace(ctx, wire.SubmitRequest{Task: " "}, "", bytes.NewReader(bigTarGz))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != wire.CodeValidation {
		t.Errorf("invalid task with a large upload: %v, want the server's 422", err)
	}
	broken := errors.New("disk gone")
	_, err = c.SubmitWorkspace(ctx, wire.SubmitRequest{Task: "t"}, "", &failingReader{bytes.NewReader(bigTarGz[:1<<20]), broken})
	if !errors.Is(err, broken) {
		t.Errorf("broken archive: %v, want %v", err, broken)
	}
	// The client gives up at once; the server removes what it unpacked
	// when it sees the body end.
	deadline := time.Now().Add(10 * time.Second)
	for names := workspaces(t, e); !slices.Equal(names, []string{sr.JobID}); names = workspaces(t, e) {
		if time.Now().After(deadline) {
			t.Fatalf("workspaces %v, want only %s", names, sr.JobID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func workspaces(t *testing.T, e *apitest.Env) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.DataDir, "workspaces"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

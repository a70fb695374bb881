package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/wire"
)

// partials lists what an unpack in progress (or cut short) keeps beside
// the server's workspaces.
func partials(t *testing.T, dataDir string) []string {
	t.Helper()
	var found []string
	for _, pattern := range []string{".job_*.unpack-*", ".job_*.copy-*", ".upload-*.zip"} {
		m, err := filepath.Glob(filepath.Join(dataDir, "workspaces", pattern))
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, m...)
	}
	return found
}

// stalledUpload starts an upload whose archive stops after its first MiB,
// until the returned func is called.
func stalledUpload(t *testing.T, s *server) (release func()) {
	t.Helper()
	c, err := client.New(s.url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.SubmitWorkspace(context.Background(), wire.SubmitRequest{Task: "never"}, "", pr)
	}()
	go func() {
		gz := gzip.NewWriter(pw)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644, Size: 64 << 20})
		io.CopyN(tw, rand.Reader, 1<<20)
		gz.Flush()
	}()
	return func() {
		pw.CloseWithError(io.ErrClosedPipe)
		<-done
	}
}

// TestUploadSurvivesACrashAndReachesTheFirstTool: a server killed while
// it unpacks an upload leaves a partial tree, which the next start
// removes, with no job for it; then a directory submitted with
// submit --workspace is in /workspace when the job's first tool runs.
func TestUploadSurvivesACrashAndReachesTheFirstTool(t *testing.T) {
	t.Parallel()
	s, fake := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "cat src/app.py && ls -l /workspace"})),
		step(llmtest.Call("finish", map[string]any{"summary": "read it"})),
	}})
	release := stalledUpload(t, s)
	waitUntil(t, 30*time.Second, func() bool { return len(partials(t, s.dataDir)) > 0 })
	s.cmd.Process.Kill()
	s.cmd.Wait()
	release()
	s.start()
	if left := partials(t, s.dataDir); len(left) > 0 {
		t.Errorf("after a restart, partial uploads are left: %v\n%s", left, s.logs)
	}
	var list struct{ Jobs []jobDTO }
	if s.do("GET", "/v1/jobs", nil, &list); len(list.Jobs) != 0 {
		t.Errorf("jobs %+v, want none from the cut-short upload", list.Jobs)
	}

	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "src/app.py"), []byte("print('UPLOADED-CONTENT')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runClient(context.Background(), "", "submit", "--url", s.url, "--token", testToken, "--workspace", dir, "read app.py")
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, errOut)
	}
	id := strings.TrimSpace(out)
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	texts, _ := s.toolResults(id)
	if len(texts) == 0 || !strings.Contains(texts[0], "UPLOADED-CONTENT") {
		t.Errorf("the first tool call saw %q, want the uploaded file", texts)
	}
	if reqs := fake.Requests(); len(reqs) != 2 {
		t.Errorf("%d model requests, want 2", len(reqs))
	}
	if f := s.zipFiles(t, id); f["src/app.py"] != "print('UPLOADED-CONTENT')\n" {
		t.Errorf("the job's zip lacks the uploaded file: %v", keys(f))
	}
}

package main

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
)

// hostileTask leaves in the workspace what issue 10 calls hostile to a
// zip: a 9 GiB sparse file (no disk, about a minute of CPU as zeros; under
// the default 10 GiB disk quota, which RLIMIT_FSIZE puts on any one file),
// a name with a backslash and a control character, and a symlink out of the
// workspace.
const hostileTask = `truncate -s 9G big && echo x > "$(printf 'a\\b\001c')" && ln -s /etc/passwd passwd && echo ok > ok.txt`

// zipBudget is how long a zip of the hostile workspace may take; expanding
// the sparse file would take a minute or more.
const zipBudget = 15 * time.Second

// checkHostileZip checks the zip of hostileTask's workspace: the sparse
// file and the link left out, the name made safe, and the manifest saying
// so.
func checkHostileZip(t *testing.T, b []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, f := range zr.File {
		if f.UncompressedSize64 > 1<<20 {
			bodies[f.Name] = "(too big to read)"
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		rc.Close()
		bodies[f.Name] = string(body)
	}
	if bodies["ok.txt"] != "ok\n" || bodies["a_b_c"] != "x\n" || len(bodies) != 3 {
		t.Errorf("entries %q, want ok.txt, a_b_c and the manifest", keys(bodies))
	}
	manifest := bodies[artifact.ManifestName]
	for _, want := range []string{`left out "big": sparse file of 9GiB`, `left out "passwd": symlink to "/etc/passwd", outside the workspace`,
		`stored "a\\b\x01c" as "a_b_c": not a safe name`} {
		if !strings.Contains(manifest, want) {
			t.Errorf("manifest lacks %q:\n%s", want, manifest)
		}
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestServeZipsAHostileWorkspace(t *testing.T) {
	s := newServer(t)
	s.start()
	id, code := s.submit(hostileTask)
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	start := time.Now()
	b := s.get(t, "/v1/jobs/"+id+"/artifacts.zip", 200)
	if d := time.Since(start); d > zipBudget {
		t.Errorf("artifacts.zip took %v: the sparse file was expanded", d)
	}
	checkHostileZip(t, b)
}

// stampedWriter keeps each write with the time it came.
type stampedWriter struct {
	mu     sync.Mutex
	writes []string
	at     []time.Time
}

func (w *stampedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes, w.at = append(w.writes, string(p)), append(w.at, time.Now())
	return len(p), nil
}

// after is how long after the write starting with prefix the next came.
func (w *stampedWriter) after(prefix string) time.Duration {
	for i, s := range w.writes[:len(w.writes)-1] {
		if strings.HasPrefix(s, prefix) {
			return w.at[i+1].Sub(w.at[i])
		}
	}
	return -1
}

func TestRunZipsAHostileWorkspace(t *testing.T) {
	instance := sandboxEnv(t)
	t.Setenv("AGENTBOX_AGENT", "shell")
	root := newRootCmd()
	var out bytes.Buffer
	errw := &stampedWriter{}
	root.SetOut(&out)
	root.SetErr(errw)
	root.SetArgs([]string{"run", hostileTask})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("run: %v\n%s", err, strings.Join(errw.writes, ""))
	}
	errOut := strings.Join(errw.writes, "")
	// The zip is written between the job's final state and the summary.
	if d := errw.after("[complete]"); d < 0 || d > zipBudget {
		t.Errorf("the summary came %v after the job ended: the sparse file was expanded\n%s", d, errOut)
	}
	if !strings.Contains(errOut, "agentbox: 3 workspace entries left out of the zip or stored differently; "+artifact.ManifestName) {
		t.Errorf("run does not say entries were left out:\n%s", errOut)
	}
	b, err := os.ReadFile(artifactsPath(t, errOut))
	if err != nil {
		t.Fatal(err)
	}
	checkHostileZip(t, b)
	assertNoSandboxes(t, instance)
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunShowsNoInternalWarnings: `agentbox run` beside a server of the
// same AGENTBOX_INSTANCE and another data dir lists the server's sandbox
// and leaves it alone; that used to print "a container carries the
// labels of this installation's sandboxes" (twice) among the job's
// lines. Now the display shows the job only, and the run's log file has
// the note.
func TestRunShowsNoInternalWarnings(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id, code := s.submit("sleep 300")
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	waitUntil(t, time.Minute, func() bool { return s.job(id).Status == "running" && s.sandboxes() > 0 })
	// A single-node server has no internal endpoint, so no cluster
	// secret to miss (it warned of one at every start).
	if strings.Contains(s.logs.String(), "cluster secret") {
		t.Errorf("a single-node server's log speaks of a cluster secret:\n%s", s.logs)
	}

	dataDir := t.TempDir()
	cmd := exec.Command(guestBinary, "run", "echo hi")
	cmd.Env = append(s.env, "AGENTBOX_DATA_DIR="+dataDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, unwanted := range []string{"level=", "labels of this installation", "another installation"} {
		if strings.Contains(stderr.String(), unwanted) {
			t.Errorf("run's display has %q:\n%s", unwanted, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "complete") || stdout.String() != "hi\n" {
		t.Errorf("run: stdout %q, stderr:\n%s", stdout.String(), stderr.String())
	}
	logs, _ := filepath.Glob(filepath.Join(dataDir, "runs", "*", "run.log"))
	if len(logs) != 1 {
		t.Fatalf("run logs %v, want one", logs)
	}
	b, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(b), "another installation's sandbox") {
		t.Errorf("%s does not note the server's sandbox:\n%s", logs[0], b)
	}
}

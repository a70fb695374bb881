package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeRetention: a real server's janitor removes the workspace of a
// job once AGENTBOX_RETENTION has passed since it ended, keeps its record
// and log (marked deleted), and /metrics shows the free disk space and its
// floor. Needs Docker (for the job's sandbox).
func TestServeRetention(t *testing.T) {
	t.Parallel()
	s := newServer(t, "AGENTBOX_RETENTION=3s", "AGENTBOX_MIN_FREE_DISK=3m")
	s.start()
	metrics := string(s.get(t, "/metrics", 200))
	if free := metricValue(t, metrics, "agentbox_disk_free_bytes"); free <= 0 {
		t.Errorf("agentbox_disk_free_bytes = %v, want the data dir's free space", free)
	}
	if floor := metricValue(t, metrics, "agentbox_disk_min_free_bytes"); floor != 3<<20 {
		t.Errorf("agentbox_disk_min_free_bytes = %v, want %d", floor, 3<<20)
	}

	id, code := s.submit("echo kept > out.txt")
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	ws := filepath.Join(s.dataDir, "workspaces", id)
	var j struct {
		Status    string    `json:"status"`
		DeletedAt time.Time `json:"deleted_at"`
	}
	// The janitor marks the job deleted, logs the deleted event, then
	// removes the workspace: wait for the last of these (the mark alone
	// raced the rest on a loaded machine).
	waitUntil(t, 30*time.Second, func() bool {
		s.do("GET", "/v1/jobs/"+id, nil, &j)
		_, err := os.Lstat(ws)
		return !j.DeletedAt.IsZero() && os.IsNotExist(err)
	})
	if j.Status != "complete" {
		t.Errorf("status after retention: %s, want complete", j.Status)
	}
	s.get(t, "/v1/jobs/"+id+"/artifacts.zip", 410)
	var page struct {
		Events []struct {
			Type    string `json:"type"`
			Payload struct {
				Reason string `json:"reason"`
			} `json:"payload"`
		} `json:"events"`
	}
	s.do("GET", "/v1/jobs/"+id+"/events", nil, &page)
	if n := len(page.Events); n < 2 || page.Events[n-1].Type != "deleted" || page.Events[n-1].Payload.Reason != "retention" {
		t.Errorf("events end with %+v, want a deleted event, reason retention", page.Events)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve did not exit cleanly on SIGTERM: %v\n%s", err, s.logs)
	}
}

// metricValue reads an unlabelled sample from Prometheus text.
func metricValue(t *testing.T, text, name string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s:\n%s", name, text)
	return 0
}

package jobs_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestCheckpointHostileWorkspace: a sandbox on a disk of 64 MiB makes a
// sparse file of 1 TiB (which costs its quota nothing), a FIFO, links to
// the host's /etc/shadow, and then replaces a directory by a link to /etc.
// Every checkpoint succeeds at once, skipping the sparse file and the FIFO
// (no terabyte of zeros read or put), recording links as links, and the
// service's files from the checkpoint never read the host's /etc.
func TestCheckpointHostileWorkspace(t *testing.T) {
	c := newCluster(t)
	a, _ := modelAgent(t, llmtest.Steps(
		bash("truncate -s 1T big && mkfifo fifo && ln -s /etc/shadow shadow && mkdir d && echo x > d/f && echo hi > a.txt"),
		bash("mv d d2 && ln -s /etc d && ls -la"),
		finish))
	w := c.worker(t, "w1", a)
	id := submit(t, w.svc, "be hostile", store.Limits{DiskBytes: 64 << 20})
	if j := await(t, w.svc, id); j.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", j.Status, j.Error)
	}
	steps := 0
	for _, p := range payloads[event.Checkpoint](t, w.svc, id) {
		if p.Tree == workspace.TreeWorkspace && p.Error == "" {
			steps = max(steps, p.Step)
		}
		if p.Error != "" || p.Tree == workspace.TreeWorkspace && (p.Bytes > 1<<20 || p.MS > 10_000) {
			t.Errorf("checkpoint %+v: want no error, no bytes of big, quick", p)
		}
	}
	if steps < 2 {
		t.Errorf("workspace checkpointed up to step %d, want 2 at least", steps)
	}
	root, err := w.shared.Open(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"big", "fifo"} {
		if _, err := root.Lstat(name); err == nil {
			t.Errorf("%s is in the checkpoint", name)
		}
	}
	if target, err := root.Readlink("d"); err != nil || target != "/etc" {
		t.Errorf("d: %q, %v; want the link to /etc", target, err)
	}
	for _, name := range []string{"shadow", "d/passwd", "d/hostname"} {
		if b, err := root.ReadFile(name); err == nil {
			t.Errorf("%s read through the checkpoint: %q", name, b)
		}
	}
	if b, err := root.ReadFile("d2/f"); err != nil || string(b) != "x\n" {
		t.Errorf("d2/f: %q, %v", b, err)
	}
	var stored int64
	filepath.WalkDir(blobsDir(t, c), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			stored += fi.Size()
		}
		return nil
	})
	if stored > 8<<20 {
		t.Errorf("the blob store holds %d bytes", stored)
	}
}

func blobsDir(t *testing.T, c *cluster) string {
	t.Helper()
	d, ok := c.blobs.(interface{ Dir() string })
	if !ok {
		t.Fatal("not a dirblobs store")
	}
	return d.Dir()
}

package docker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
)

// inodeFlood makes 30,000 empty files in the workspace (no data: 117 MiB
// of entries at the watchdog's 4 KiB each, under a 256 MiB quota's bytes),
// says whether any creation failed for want of space, and how many it
// made.
const inodeFlood = "mkdir d && cd d && (seq 30000 | xargs touch 2>&1 | grep -q 'No space left' && echo ENOSPC); ls -f | wc -l"

// TestInodeFloodIsBounded: empty files cost the host an inode each and
// almost nothing of a quota's bytes; a sandbox may hold
// sandbox.InodeLimit(its quota) of them, on the loop disk (ENOSPC) as
// under the watchdog (stopped), and the copy back leaves the host no
// more.
func TestInodeFloodIsBounded(t *testing.T) {
	const quota = 256 << 20 // mkfs.ext4's default would give it 65,536 inodes
	limit := sandbox.InodeLimit(quota)
	t.Run("loop disk", func(t *testing.T) {
		requireLoopDisks(t)
		d := newDriver(t)
		ws := t.TempDir()
		s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: quota}}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true})
		res := sh(t, s, inodeFlood)
		out := strings.Fields(string(res.Stdout))
		if len(out) != 2 || out[0] != "ENOSPC" {
			t.Fatalf("30,000 empty files on a %d MiB quota: %q (stderr %q), want ENOSPC", quota>>20, res.Stdout, res.Stderr)
		}
		if n, _ := strconv.ParseInt(out[1], 10, 64); n > limit {
			t.Errorf("the sandbox made %d entries, over the %d its quota allows", n, limit)
		}
		s.Destroy(context.Background())
		if n := entries(t, ws); n > limit {
			t.Errorf("the copy back made %d entries on the host, over the %d bound", n, limit)
		}
		assertNoLeak(t, d)
	})
	t.Run("watchdog", func(t *testing.T) {
		d := newDriver(t, func(c *docker.Config) { c.Quota = docker.QuotaWatch })
		s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: quota}}, sandbox.Binding{WorkspaceDir: t.TempDir()})
		req := guest.Shell(inodeFlood + "; sleep 30")
		req.TimeoutMS = 120_000
		s.Guest().Exec(context.Background(), req)
		why := s.(sandbox.Stopper).Stopped()
		if !errors.Is(why, sandbox.ErrDiskQuota) || !strings.Contains(why.Error(), "files, directories and links") {
			t.Errorf("30,000 empty files on a %d MiB quota (%d entries): stopped %v", quota>>20, limit, why)
		}
	})
}

// entries counts what is under dir, dir itself not.
func entries(t *testing.T, dir string) int64 {
	t.Helper()
	n := int64(-1)
	filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n
}

// TestFreeInodesFloor: no sandbox starts while the filesystem of its
// state dir or workspace has fewer free inodes than the floor.
func TestFreeInodesFloor(t *testing.T) {
	d := newDriver(t, func(c *docker.Config) { c.MinFreeInodes = 1 << 60 })
	_, err := d.Create(context.Background(), sandbox.Spec{})
	if !errors.Is(err, sandbox.ErrNoSpace) || !strings.Contains(err.Error(), "AGENTBOX_MIN_FREE_INODES") {
		t.Fatalf("err = %v, want ErrNoSpace naming AGENTBOX_MIN_FREE_INODES", err)
	}
	assertNoLeak(t, d)
}

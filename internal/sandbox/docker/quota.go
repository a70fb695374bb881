package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Disk quota modes: how a sandbox's DiskBytes is enforced.
const (
	// QuotaXFS is an XFS project quota on the workspace: past it, writes
	// fail with ENOSPC inside the sandbox. Used when the workspace's
	// filesystem enforces project quotas and agentbox runs as root.
	QuotaXFS = "xfs-project-quota"
	// QuotaLoop is a loop-mounted filesystem of the quota's size holding
	// the workspace while the sandbox runs (ENOSPC past it), for workspaces
	// agentbox owns, when agentbox runs as root (package loopdisk).
	QuotaLoop = loopdisk.Mode
	// QuotaWatch is a watchdog that measures the workspace and stops the
	// sandbox once it holds more than its quota, with RLIMIT_FSIZE keeping
	// any one file within it. For a directory a person brought
	// (agentbox exec --workspace) or a host that allows nothing better.
	QuotaWatch = "watchdog"
)

// Watchdog timing: the free-space floor is checked every watchInterval,
// and the workspace measured every watchInterval, or twenty times as long
// as the last measurement took when that is longer (diskusage.Pacer: the
// watchdog costs at most 5% of a CPU; the walk itself is bounded by the
// quota's inodes). A sandbox can pass its quota by
// what it writes between two measurements and before it is frozen; no one
// file can pass it, since RLIMIT_FSIZE is just under the quota (fileCap).
const watchInterval = 100 * time.Millisecond

// QuotaMode says how the quota of a job's sandbox whose workspace is in
// dir would be enforced.
func (d *Driver) QuotaMode(dir string) string {
	return d.quotaMode(dir, true)
}

// quotaMode chooses how to enforce the quota of a workspace in dir;
// managed says whether agentbox owns it (a job's or a scratch workspace).
func (d *Driver) quotaMode(dir string, managed bool) string {
	switch {
	case d.cfg.Quota == QuotaWatch:
		return QuotaWatch
	case xfsQuotas(dir):
		return QuotaXFS
	case managed && loopdisk.Available():
		return QuotaLoop
	}
	return QuotaWatch
}

// modeOf is how the quota of an existing sandbox is enforced.
func (d *Driver) modeOf(h record) string {
	switch {
	case loopdisk.Has(h.StateDir):
		return QuotaLoop
	case d.cfg.Quota != QuotaWatch && xfsQuotas(h.WorkspaceDir):
		return QuotaXFS
	}
	return QuotaWatch
}

// DiskFree is the space left for unprivileged users on the filesystem
// holding dir.
func DiskFree(dir string) (int64, error) {
	free, err := diskusage.FreeOf(dir)
	return free.Bytes, err
}

// floor is the free space and inodes below which no sandbox starts.
func (d *Driver) floor() diskusage.Floor {
	return diskusage.Floor{Bytes: d.cfg.MinFreeBytes, Inodes: d.cfg.MinFreeInodes}
}

// checkFree refuses a new sandbox while a filesystem it writes to is
// below the free-space or free-inodes floor.
func (d *Driver) checkFree(dirs ...string) error {
	return d.floor().Check(dirs...)
}

// freeze stops every process of container id through its cgroup, without
// waiting for the engine: cgroup v2's cgroup.kill, or v1's freezer, under
// the cgroupfs or the systemd driver's layout. Best effort.
func freeze(id string) {
	for _, f := range []struct{ path, value string }{
		{"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/cgroup.kill", "1"},
		{"/sys/fs/cgroup/docker/" + id + "/cgroup.kill", "1"},
		{"/sys/fs/cgroup/freezer/docker/" + id + "/freezer.state", "FROZEN"},
		{"/sys/fs/cgroup/freezer/system.slice/docker-" + id + ".scope/freezer.state", "FROZEN"},
	} {
		if os.WriteFile(f.path, []byte(f.value), 0) == nil {
			return
		}
	}
}

// applyQuota puts the workspace under an XFS project quota before the
// sandbox starts.
func applyQuota(h record) error {
	if err := setProjectTree(h.WorkspaceDir, uint32(h.UID)); err != nil {
		return err
	}
	return setProjectLimit(h.WorkspaceDir, uint32(h.UID), h.DiskBytes)
}

// releaseQuota lifts a kernel quota and hands the workspace's files back to
// project 0, so that a later sandbox with the same uid starts from nothing.
func releaseQuota(h record) error {
	if h.UID == 0 || h.WorkspaceDir == "" || !xfsQuotas(h.WorkspaceDir) {
		return nil
	}
	err := setProjectLimit(h.WorkspaceDir, uint32(h.UID), 0)
	if !h.OwnsWorkspace {
		err = errors.Join(err, setProjectTree(h.WorkspaceDir, 0))
	}
	return err
}

// watchDisk measures the workspace until ctx ends and stops the sandbox
// once it holds more than its quota.
func (s *Sandbox) watchDisk(ctx context.Context) {
	dir := workspaceSource(s.h)
	pace := diskusage.Pacer{MinInterval: watchInterval}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(watchInterval):
		}
		if why := s.d.belowFloor(dir); why != nil {
			s.stop(ctx, why)
			return
		}
		if !pace.Due(time.Now()) {
			continue
		}
		begin := time.Now()
		used := diskusage.Measure(dir)
		pace.Measured(begin)
		if why := diskusage.OverQuota(used, s.h.DiskBytes); why != nil {
			s.stop(ctx, why)
			return
		}
	}
}

// belowFloor says why the sandbox must stop if the filesystem of dir fell
// under the free-space or free-inodes floor while it ran. It is checked
// every tick, and costs one statfs: whatever the walk cannot see (files
// deleted but held open, space reserved with fallocate's KEEP_SIZE) still
// cannot take the host's disk below the floor.
func (d *Driver) belowFloor(dir string) error {
	why, err := d.floor().Below(dir)
	if err != nil || why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s; the sandbox was stopped", sandbox.ErrNoSpace, why)
}

// stop records why the driver stopped the sandbox and kills it: frozen
// at once through its cgroup where the host's layout is known, then killed
// through the engine.
func (s *Sandbox) stop(ctx context.Context, why error) {
	s.stopped.CompareAndSwap(nil, &why)
	freeze(s.h.Ref)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.d.cli.ContainerKill(kctx, s.h.Ref, "KILL"); err != nil {
		s.d.log.Warn("stop sandbox over its disk quota", "sandbox_id", s.h.ID, "err", err)
	}
}

// Stopped returns why the driver stopped the sandbox, or nil.
func (s *Sandbox) Stopped() error {
	if p := s.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// lockRunDir takes the socket directory back from the sandbox once its
// guest listens there: nothing in the sandbox can then replace the socket
// or fill the directory.
func lockRunDir(dir string) error {
	if isRoot() {
		if err := unix.Lchown(dir, 0, 0); err != nil {
			return fmt.Errorf("lock socket dir: %w", err)
		}
	}
	if err := unix.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("lock socket dir: %w", err)
	}
	return nil
}

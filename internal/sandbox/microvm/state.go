package microvm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// State is the microVM driver's record of a sandbox, in its handle.
type State struct {
	// StateDir is the sandbox's own host directory (see DriverConfig.StateDir).
	StateDir string `json:"state_dir"`
	// WorkspaceDir is the host directory shared as the VM's /workspace.
	WorkspaceDir string `json:"workspace_dir"`
	// OwnsWorkspace says whether Destroy removes WorkspaceDir (a scratch
	// workspace inside StateDir).
	OwnsWorkspace bool `json:"owns_workspace,omitempty"`
	// WorkspaceOwner is "uid:gid", who owned a caller's workspace before
	// it was given to the guest's agent uid; Destroy gives it back.
	WorkspaceOwner string `json:"workspace_owner,omitempty"`
	// UID is the host uid QEMU runs as, the VM's own.
	UID int `json:"uid,omitempty"`
	// DiskBytes is the disk quota: the size of the workspace's loop disk,
	// or, for a caller's own directory, what the watchdog lets it hold.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// NoFile is the sandbox's open-files limit, which virtiofsd's follows
	// (fsNoFile).
	NoFile int64 `json:"nofile,omitempty"`
	// Accel, MemoryMiB and CPUs are what the VM runs with.
	Accel     Accel `json:"accel"`
	MemoryMiB int   `json:"memory_mib"`
	CPUs      int   `json:"cpus"`
}

// handleFile is where each sandbox's handle is kept in its state
// directory, for List.
const handleFile = "handle.json"

// pidFile is QEMU's pid file in the state directory.
const pidFile = "qemu.pid"

func handleOf(id, jobID, owner string, st State) (sandbox.Handle, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return sandbox.Handle{}, err
	}
	return sandbox.Handle{ID: id, Driver: DriverName, JobID: jobID, Owner: owner,
		Isolation: sandbox.IsolationMicroVM, Version: sandbox.HandleVersion, State: raw}, nil
}

// stateOf reads a handle's State, refusing one that is not this driver's.
func stateOf(h sandbox.Handle) (State, error) {
	var st State
	if h.Driver != DriverName {
		return st, fmt.Errorf("%w: handle of driver %q, not %s", sandbox.ErrInvalidSpec, h.Driver, DriverName)
	}
	if err := json.Unmarshal(h.State, &st); err != nil || st.StateDir == "" {
		return st, fmt.Errorf("%w: microvm handle state: %v", sandbox.ErrInvalidSpec, err)
	}
	return st, nil
}

// writeHandle records h in its state directory.
func writeHandle(dir string, h sandbox.Handle) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, handleFile), b, 0o600); err != nil {
		return fmt.Errorf("sandbox handle: %w", err)
	}
	return nil
}

// qemuPID is the pid in the sandbox's pid file if that process is still
// the QEMU of this sandbox (its command line names the state directory:
// a pid reused by another process is never ours), else 0.
func qemuPID(st State) int {
	b, err := os.ReadFile(filepath.Join(st.StateDir, pidFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return 0
	}
	args := bytes.Split(cmdline, []byte{0})
	if !strings.HasPrefix(filepath.Base(string(args[0])), "qemu-system") ||
		!bytes.Contains(cmdline, []byte("\x00guest="+qemuOpt(vmMarker(st.StateDir))+"\x00")) {
		return 0
	}
	return pid
}

// killQEMU kills the sandbox's QEMU if it still runs (in another process:
// one this process started is stopped through its VM), and the virtiofsd
// serving its loop disk if one is left, and waits for both to be gone:
// nothing may write the disk while it is copied back.
func killQEMU(st State) {
	pids := fsDaemonPIDs(st)
	if pid := qemuPID(st); pid != 0 {
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		killAndWait(pid, 10*time.Second)
	}
}

// fsDaemonPIDs are the virtiofsd processes sharing the sandbox's loop
// disk: their command line names its mount point as their source.
func fsDaemonPIDs(st State) []int {
	if !loopdisk.Has(st.StateDir) {
		return nil
	}
	_, mnt := loopdisk.Paths(st.StateDir)
	want := []byte("source=" + mnt + "\x00")
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, want) || !strings.HasSuffix(string(bytes.SplitN(b, []byte{0}, 2)[0]), "virtiofsd") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAndWait kills pid and waits, up to limit, for it to be gone,
// through a pidfd (the process is not this one's child): a pid reused in
// between is never signalled, as the pidfd names the process itself.
func killAndWait(pid int, limit time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if n > 0 || err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// removeState copies a loop disk's content back to a caller's workspace
// (a job's: the job may restart on it) and removes the disk, gives a
// caller's workspace back to its owner and removes the state directory
// (and with it a scratch workspace). Call it once QEMU and virtiofsd are
// gone. What could not be copied back is said, but the state dir goes
// all the same: nothing would be left to reap it later.
func removeState(st State) error {
	var errs []error
	if loopdisk.Has(st.StateDir) {
		if err := loopdisk.Remove(st.StateDir, st.WorkspaceDir, !st.OwnsWorkspace); err != nil {
			errs = append(errs, fmt.Errorf("workspace disk: %w", err))
		}
	}
	if st.WorkspaceOwner != "" && !st.OwnsWorkspace {
		var uid, gid int
		if _, err := fmt.Sscanf(st.WorkspaceOwner, "%d:%d", &uid, &gid); err == nil {
			if err := loopdisk.GiveBack(st.WorkspaceDir, uid, gid); err != nil {
				errs = append(errs, fmt.Errorf("give the workspace back: %w", err))
			}
		}
	}
	_, mnt := loopdisk.Paths(st.StateDir)
	if loopdisk.Mounted(mnt) {
		// Never remove the state dir through a disk still mounted in it.
		return errors.Join(append(errs, fmt.Errorf("remove sandbox state: %s is still mounted", mnt))...)
	}
	if err := os.RemoveAll(st.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox state: %w", err))
	}
	return errors.Join(errs...)
}

// ownerOf is "uid:gid" of path.
func ownerOf(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid), nil
}

package microvm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/sandbox"
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
// one this process started is stopped through its VM).
func killQEMU(st State) {
	if pid := qemuPID(st); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// removeState gives a caller's workspace back to its owner and removes
// the state directory (and with it a scratch workspace).
func removeState(st State) error {
	var errs []error
	if st.WorkspaceOwner != "" && !st.OwnsWorkspace {
		var uid, gid int
		if _, err := fmt.Sscanf(st.WorkspaceOwner, "%d:%d", &uid, &gid); err == nil {
			if err := chownTree(st.WorkspaceDir, uid, gid); err != nil {
				errs = append(errs, fmt.Errorf("give the workspace back: %w", err))
			}
		}
	}
	if err := os.RemoveAll(st.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox state: %w", err))
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// chownTree gives dir and everything in it (never following links) to
// uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
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

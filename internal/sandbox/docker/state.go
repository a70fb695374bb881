package docker

import (
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// DriverName is the name drivers.Open knows this driver by, and the
// Driver field of its handles.
const DriverName = "docker"

// State is the Docker driver's own record of a sandbox, kept in its
// handle's State, as Nomad's drivers keep their DriverState. Version 1
// handles carried the same fields, by the same JSON names, at their top
// level, without Transport (the unix socket was the only one).
//
// It holds the guest's secret: never log it.
type State struct {
	// Ref is the container's ID.
	Ref string `json:"ref"`
	// StateDir is the host directory holding the guest's socket directory
	// (mounted at /run/agentbox) and the sandbox's passwd and group files.
	StateDir string `json:"state_dir"`
	// WorkspaceDir is the host directory of the sandbox's /workspace: the
	// directory itself, or for a ManagedWorkspace the home its content
	// returns to when the sandbox is destroyed (the driver may hold it on a
	// disk of its own meanwhile, to enforce the disk quota).
	WorkspaceDir string `json:"workspace_dir"`
	// OwnsWorkspace says whether Destroy removes WorkspaceDir.
	OwnsWorkspace bool `json:"owns_workspace,omitempty"`
	// UID is the host uid the sandbox's processes run as.
	UID int `json:"uid,omitempty"`
	// DiskBytes is the sandbox's disk quota.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// WorkspaceOwner is "uid:gid", who owned a caller's workspace before
	// the sandbox; Destroy gives it back to them.
	WorkspaceOwner string `json:"workspace_owner,omitempty"`
	// Transport is how the host reaches the guest: TransportUnix (also
	// when empty) or TransportTCP.
	Transport string `json:"transport,omitempty"`
	// GuestAddr is where the guest listens over TCP, in the container's
	// own network namespace.
	GuestAddr string `json:"guest_addr,omitempty"`
	// Secret is what every TCP request to the guest carries. It is kept
	// here, in the store, so that Recover reaches the guest again.
	Secret string `json:"secret,omitempty"`
}

// record is what the driver knows of one sandbox: who it is and its State.
type record struct {
	ID, JobID, Owner string
	// Isolation is the tier the sandbox runs under; "" for the container
	// tier.
	Isolation string
	State
}

// handle is the sandbox's handle, as this release writes it.
func (r record) handle() sandbox.Handle {
	st, err := json.Marshal(r.State)
	if err != nil { // strings, numbers and a bool: never fails
		panic(fmt.Sprintf("docker: encode sandbox state: %v", err))
	}
	return sandbox.Handle{ID: r.ID, Driver: DriverName, JobID: r.JobID, Owner: r.Owner, Isolation: r.Isolation,
		Version: sandbox.HandleVersion, State: st}
}

// recordOf reads a handle of either version this driver wrote.
func recordOf(h sandbox.Handle) (record, error) {
	st, err := StateOf(h)
	return record{ID: h.ID, JobID: h.JobID, Owner: h.Owner, Isolation: h.Isolation, State: st}, err
}

// StateOf reads the Docker driver's State from a handle of either version
// (see sandbox.HandleVersion).
func StateOf(h sandbox.Handle) (State, error) {
	var st State
	if h.Driver != DriverName && h.Driver != "" {
		return st, fmt.Errorf("%w: sandbox %s is the %q driver's, not docker's", sandbox.ErrInvalidSpec, h.ID, h.Driver)
	}
	if h.Version < 1 || h.Version > sandbox.HandleVersion {
		return st, fmt.Errorf("%w: sandbox %s has a version %d handle; this release reads versions 1 to %d",
			sandbox.ErrInvalidSpec, h.ID, h.Version, sandbox.HandleVersion)
	}
	if len(h.State) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(h.State, &st); err != nil {
		return st, fmt.Errorf("%w: sandbox %s: state: %w", sandbox.ErrInvalidSpec, h.ID, err)
	}
	return st, nil
}

// HostPaths lists the host directories the sandbox h owns, which Destroy
// removes: its state directory and, unless it is the caller's, its
// workspace (for the conformance suite's sandbox.HostPather).
func (d *Driver) HostPaths(h sandbox.Handle) ([]string, error) {
	st, err := StateOf(h)
	if err != nil {
		return nil, err
	}
	paths := []string{st.StateDir}
	if st.OwnsWorkspace {
		paths = append(paths, st.WorkspaceDir)
	}
	return paths, nil
}

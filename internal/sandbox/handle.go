package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// HandleVersion is the version of the handles this release writes.
//
// Version 1 handles, written before handles had a version, kept the Docker
// driver's fields (ref, state_dir, workspace_dir, owns_workspace, uid,
// disk_bytes, workspace_owner) at their top level. Handle.UnmarshalJSON
// reads one as Version 1 with those fields, as they were, for State; the
// Docker driver reads both versions.
const HandleVersion = 2

// Handle is what is persisted about a sandbox to find it again. Everything
// engine-specific (a container ID, host directories, how the guest is
// reached and its secret) is the driver's own State, which only the driver
// that wrote it reads.
type Handle struct {
	ID     string `json:"id"`
	Driver string `json:"driver"`
	JobID  string `json:"job_id,omitempty"`
	Owner  string `json:"owner,omitempty"`
	// Isolation is the tier the sandbox runs under; empty for
	// IsolationContainer (handles written before tiers).
	Isolation string `json:"isolation,omitempty"`
	// Version is the layout of the handle (HandleVersion when written by
	// this release).
	Version int `json:"version"`
	// State is the driver's own record of the sandbox, as JSON. It may hold
	// secrets: never log it.
	State json.RawMessage `json:"state,omitempty"`
}

// handleKeys are the fields of a handle that are not the driver's, in
// either version; v1 handles also carried "running", which List filled in.
var handleKeys = []string{"id", "driver", "job_id", "owner", "isolation", "version", "state", "running"}

// UnmarshalJSON reads a handle of any version; see HandleVersion.
func (h *Handle) UnmarshalJSON(b []byte) error {
	if strings.TrimSpace(string(b)) == "null" {
		return nil
	}
	type plain Handle // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	if p.Version == 0 {
		state, err := v1State(b)
		if err != nil {
			return err
		}
		p.Version, p.State = 1, state
	}
	*h = Handle(p)
	return nil
}

// v1State is a version 1 handle's driver fields, as an object of their own.
func v1State(b []byte) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("version 1 sandbox handle: %w", err)
	}
	for k := range fields {
		if slices.Contains(handleKeys, k) {
			delete(fields, k)
		}
	}
	return json.Marshal(fields)
}

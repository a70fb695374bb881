package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/seccomp"
)

// seccompProfile is the seccomp profile every sandbox runs under
// (internal/seccomp, which a microVM's guest compiles too): Docker's default
// profile less the syscalls docs/security.md lists, io_uring first.
// Applying our own profile rather than the engine's default keeps io_uring
// shut on engines whose default still allows it (Docker before 25.0).
var seccompProfile = seccomp.JSON

// seccompOpt is the security option that applies seccompProfile. Docker's
// API takes the profile's content, not a path (the docker CLI reads the file
// and sends the text), so the compacted JSON itself is the value.
var seccompOpt = "seccomp=" + compactJSON(seccompProfile)

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		// The file is embedded at build time, so this is a broken build,
		// which internal/seccomp's TestSeccompProfile reports first.
		panic("seccomp profile: " + err.Error())
	}
	return out.String()
}

// seccompFor is the security option applying seccompProfile on an engine
// that is Podman or not. Podman's Docker-compatible API reads the option's
// value as a file path (podman#27710), so there the profile is written into
// the sandbox's private state dir and named by path.
func seccompFor(podman bool, stateDir string) (string, error) {
	if !podman {
		return seccompOpt, nil
	}
	path := filepath.Join(stateDir, "seccomp.json")
	if err := os.WriteFile(path, seccompProfile, 0o644); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	return "seccomp=" + path, nil
}

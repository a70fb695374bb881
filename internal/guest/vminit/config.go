package vminit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ConfigSerial is the serial number of the config disk: a read-only
// virtio-blk device holding the sandbox's Config as JSON, padded with NULs.
const ConfigSerial = "agentbox-config"

// WorkspaceTag is the virtio-fs tag of the shared workspace.
const WorkspaceTag = "workspace"

// Config is what the host tells the guest about its sandbox. Zero fields
// mean none: no limit, a tmpfs workspace.
type Config struct {
	// Env (KEY=VALUE) is added to the daemon's environment, which every
	// command inherits: the image's ENV, then the spec's.
	Env []string `json:"env,omitempty"`
	// MemoryBytes, PidsLimit and NanoCPUs are the limits of the cgroup the
	// daemon and its commands run in (the VM itself is a little larger:
	// its kernel and the initramfs need room of their own).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	PidsLimit   int64 `json:"pids_limit,omitempty"`
	NanoCPUs    int64 `json:"nano_cpus,omitempty"`
	// NoFile is the daemon's (and so every command's) RLIMIT_NOFILE.
	NoFile int64 `json:"nofile,omitempty"`
	// SharedWorkspace says the workspace is the virtio-fs share
	// WorkspaceTag, not a tmpfs.
	SharedWorkspace bool `json:"shared_workspace,omitempty"`
	// DaemonArgs are added to the daemon's command line (--display-size,
	// --web-base).
	DaemonArgs []string `json:"daemon_args,omitempty"`
	// AgentUID is the uid (and gid) the daemon and commands run as, the
	// VM's own (0: AgentUID). Files it makes in a shared workspace are
	// this uid's on the host too, so it is no host account's.
	AgentUID int `json:"agent_uid,omitempty"`
}

// agent is the uid the daemon runs as.
func (c Config) agent() int {
	if c.AgentUID > 0 {
		return c.AgentUID
	}
	return AgentUID
}

// Encode is c as the config disk's content: JSON padded with NULs to a
// whole number of 4 KiB blocks.
func (c Config) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append(b, make([]byte, 4096-len(b)%4096)...), nil
}

// readConfig reads the config disk, or returns the zero Config if the VM
// has none.
func readConfig() (Config, error) {
	var c Config
	serials, _ := filepath.Glob("/sys/block/*/serial")
	for _, s := range serials {
		b, err := os.ReadFile(s)
		if err != nil || strings.TrimSpace(string(b)) != ConfigSerial {
			continue
		}
		raw, err := os.ReadFile("/dev/" + filepath.Base(filepath.Dir(s)))
		if err != nil {
			return c, fmt.Errorf("config disk: %w", err)
		}
		if err := json.Unmarshal(bytes.TrimRight(raw, "\x00"), &c); err != nil {
			return c, fmt.Errorf("config disk: %w", err)
		}
		return c, nil
	}
	return c, nil
}

// cgroupRoot is where the cgroup2 hierarchy is mounted while the
// sandbox's cgroup is made; the sandbox sees only its own cgroup, bind
// mounted at /sys/fs/cgroup, as a container sees its own.
const cgroupRoot = "/run/agentbox-cgroup"

// sandboxCgroup makes the cgroup the daemon runs in, with c's limits, and
// returns it open (for clone3's CLONE_INTO_CGROUP).
func sandboxCgroup(c Config) (*os.File, error) {
	if err := (mount{"cgroup2", cgroupRoot, "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""}).do(); err != nil {
		return nil, err
	}
	defer func() {
		_ = unix.Unmount(cgroupRoot, unix.MNT_DETACH)
		_ = os.Remove(cgroupRoot)
	}()
	dir := filepath.Join(cgroupRoot, "sandbox")
	writes := [][2]string{{filepath.Join(cgroupRoot, "cgroup.subtree_control"), "+memory +pids +cpu"}}
	if c.MemoryBytes > 0 {
		writes = append(writes, [2]string{filepath.Join(dir, "memory.max"), strconv.FormatInt(c.MemoryBytes, 10)})
	}
	if c.PidsLimit > 0 {
		writes = append(writes, [2]string{filepath.Join(dir, "pids.max"), strconv.FormatInt(c.PidsLimit, 10)})
	}
	if c.NanoCPUs > 0 {
		writes = append(writes, [2]string{filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d 100000", c.NanoCPUs/10_000)})
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
	}
	if err := (mount{dir, "/sys/fs/cgroup", "", unix.MS_BIND, ""}).do(); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return f, nil
}

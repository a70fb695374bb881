package vminit

import (
	"fmt"
	"os"
)

// userNamespacesOff sets the guest kernel's user namespace limit to zero
// before the daemon starts, so no process in the VM makes one: in a user
// namespace the agent is root (unshare -Urnm), with mounts of its own and
// the rest of the kernel's root-only surface, the virtio-fs device's
// driver among it. The daemon's seccomp filter (the container tier's
// profile, DaemonSeccompFlag) refuses clone and unshare with namespace
// flags too; this holds should a filter ever let one through.
func userNamespacesOff() error {
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		return fmt.Errorf("user namespaces off: %w", err)
	}
	return nil
}

// DaemonSeccompFlag makes the guest daemon put itself, and every command
// it runs, under the sandboxes' seccomp profile (internal/seccomp) before
// it listens: in a VM no engine applies it.
const DaemonSeccompFlag = "--seccomp"

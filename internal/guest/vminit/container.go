package vminit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// HostName is the VM's host name, a container sandbox's too.
const HostName = "sandbox"

// HostsFile is what a container's runtime writes to /etc/hosts, and the
// host name on loopback: the driver writes it into the VM's root file
// system (read-only in the VM) where the image has an empty one.
const HostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + HostName + "\n"

// containerLike gives the guest what a container's runtime gives a
// container and a bare kernel does not, which programs assume: a host
// name, and the /dev/fd and /dev/std* links (bash's process
// substitution). /etc/hosts, on the read-only root, is the root file
// system's (microvm.BuildRootfs writes it).
func containerLike() error {
	if err := unix.Sethostname([]byte(HostName)); err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	for name, target := range map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, name); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("dev link: %w", err)
		}
	}
	return nil
}

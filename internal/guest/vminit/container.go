package vminit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// HostName is the VM's host name, a container sandbox's too.
const HostName = "sandbox"

// hostsFile is what a container's runtime writes to /etc/hosts, and the
// host name on loopback.
const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + HostName + "\n"

// containerLike gives the guest what a container's runtime gives a
// container and a bare kernel does not, which programs assume: a host
// name; /etc/hosts naming localhost (the image's own is the engine's
// empty placeholder that `docker export` leaves), without which
// "localhost" does not resolve; and the /dev/fd and /dev/std* links
// (bash's process substitution). It runs before the workspace is
// mounted, so nothing it writes can land in the host's directory.
func containerLike() error {
	if err := unix.Sethostname([]byte(HostName)); err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	for name, content := range map[string]string{"/etc/hosts": hostsFile, "/etc/hostname": HostName + "\n"} {
		if err := fillIfEmpty(name, content); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, name); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("dev link: %w", err)
		}
	}
	return nil
}

// fillIfEmpty writes content to name if it is missing or an empty
// regular file; an image's own content, or anything but a regular file,
// is left alone (a link is never followed).
func fillIfEmpty(name, content string) error {
	fi, err := os.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Dir(name)); err != nil {
			return nil // an image without /etc
		}
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	case !fi.Mode().IsRegular() || fi.Size() > 0:
		return nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

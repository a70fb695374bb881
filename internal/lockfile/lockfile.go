// Package lockfile keeps a directory to one process at a time: a server's
// data dir, a chat session. The lock is an flock(2) on a file in the
// directory, so the kernel drops it when its holder dies, however it dies.
package lockfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive lock on dir/name for this process's life,
// writing the pid into it, and returns the function that releases it.
// When another process holds it, the error is busy formatted with the
// holder's pid and dir (busy has two %s).
func Lock(dir, name, busy string) (unlock func(), err error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf(busy, strings.TrimSpace(string(pid)), dir)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

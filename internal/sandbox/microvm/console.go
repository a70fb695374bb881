package microvm

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// defaultConsoleLimit bounds a VM's console log on the host. The guest's
// kernel writes warnings there (loglevel=4), and code in the guest can make
// it write more of them (an OOM kill in a loop prints a few KiB each
// time): the log would otherwise grow on the host's disk for as long as
// the VM runs. Boot failures, what the log is read for, come first.
const defaultConsoleLimit = 1 << 20

// consoleFile is QEMU's serial console, written to console.log in the
// VM's dir up to a limit, then dropped with a note saying so.
type consoleFile struct {
	mu      sync.Mutex
	f       *os.File
	left    int64
	dropped bool
}

// openConsole creates dir/console.log, to take at most limit bytes.
func openConsole(dir string, limit int64) (*consoleFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, "console.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("console log: %w", err)
	}
	return &consoleFile{f: f, left: limit}, nil
}

// Write keeps what fits in the limit and drops the rest; it never fails,
// so that QEMU's console never blocks on the host.
func (c *consoleFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p[:min(int64(len(p)), max(c.left, 0))]
	if len(keep) > 0 {
		n, _ := c.f.Write(keep)
		c.left -= int64(n)
	}
	if len(keep) < len(p) && !c.dropped {
		c.dropped = true
		fmt.Fprintf(c.f, "\n[agentbox: console log cut here: over its limit; the rest is dropped]\n")
	}
	return len(p), nil
}

// Close closes the log file.
func (c *consoleFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.f.Close()
}

package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// The TCP transport: the guest listens on the loopback of the container's
// own network namespace and requires the sandbox's secret on every
// request. Sandboxes keep --network none: nothing outside the namespace can
// route to it, so the host makes each connection from inside, on a thread
// that enters the namespace for it.

// guestTCPAddr is where the guest listens with the TCP transport.
const guestTCPAddr = "127.0.0.1:7117"

// secretFile is the name, in the guest's state directory, of the file the
// guest reads its secret from. The host removes it once the guest answers.
const secretFile = "guest.secret"

// containerName is the name of a sandbox's container.
func containerName(id string) string { return "agentbox-" + id }

// writeSecret gives a TCP sandbox its secret: random, kept in st (so the
// handle in the store can reach the guest again) and in a file of the
// socket directory that only the sandbox's uid can read. The transport
// needs root, so the file can be given to that uid.
func writeSecret(st *State) error {
	if st.Transport != sandbox.TransportTCP {
		return nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("guest secret: %w", err)
	}
	st.GuestAddr, st.Secret = guestTCPAddr, hex.EncodeToString(b)
	f, err := os.OpenFile(filepath.Join(st.StateDir, "run", secretFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
	if err != nil {
		return fmt.Errorf("guest secret: %w", err)
	}
	_, err = f.WriteString(st.Secret)
	err = errors.Join(err, f.Chown(st.UID, st.UID), f.Close())
	if err != nil {
		return fmt.Errorf("guest secret: %w", err)
	}
	return nil
}

// removeSecret deletes the secret's file once the guest has read it:
// nothing the sandbox runs later finds it there.
func removeSecret(st State) error {
	if st.Transport != sandbox.TransportTCP {
		return nil
	}
	err := os.Remove(filepath.Join(st.StateDir, "run", secretFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove guest secret: %w", err)
	}
	return nil
}

// netnsDialer connects to addr inside the network namespace of the
// container ref.
func (d *Driver) netnsDialer(ref, addr string) guest.Dialer {
	n := &netns{d: d, ref: ref}
	return func(ctx context.Context) (net.Conn, error) {
		c, err := n.dial(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("guest tcp %s in sandbox %s: %w", addr, ref, err)
		}
		return c, nil
	}
}

// netns is a container's network namespace, found through its main
// process: /proc/PID/ns/net. The namespace's identity (device and inode)
// is noted when it is first found, so that a PID reused after the
// container ended never leads a connection into another namespace.
type netns struct {
	d   *Driver
	ref string

	mu       sync.Mutex
	pid      int
	dev, ino uint64
}

// target returns the namespace's path and identity, looking them up the
// first time.
func (n *netns) target(ctx context.Context) (string, unix.Stat_t, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pid == 0 {
		pid, err := n.d.containerPID(ctx, n.ref)
		if err != nil {
			return "", unix.Stat_t{}, err
		}
		var st unix.Stat_t
		if err := unix.Stat(nsPath(pid), &st); err != nil {
			return "", st, fmt.Errorf("network namespace: %w", err)
		}
		// The container may have ended between the two looks: ask again.
		if again, err := n.d.containerPID(ctx, n.ref); err != nil || again != pid {
			return "", st, fmt.Errorf("network namespace: the container's process changed (%d, then %d): %w", pid, again, err)
		}
		n.pid, n.dev, n.ino = pid, st.Dev, st.Ino
	}
	return nsPath(n.pid), unix.Stat_t{Dev: n.dev, Ino: n.ino}, nil
}

func nsPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/net" }

// containerPID is the host PID of the running container's main process.
func (d *Driver) containerPID(ctx context.Context, ref string) (int, error) {
	info, err := d.cli.ContainerInspect(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("inspect sandbox container: %w", engineErr(err))
	}
	if info.State == nil || !info.State.Running || info.State.Pid <= 0 {
		return 0, fmt.Errorf("sandbox container is not running: %w", sandbox.ErrGone)
	}
	return info.State.Pid, nil
}

// netnsDialTimeout bounds one connection to a guest over TCP: each dial
// holds a thread of its own (it dies afterwards), so dials to a frozen
// guest must not pile up.
const netnsDialTimeout = 5 * time.Second

func (n *netns) dial(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, netnsDialTimeout)
	defer cancel()
	path, want, err := n.target(ctx)
	if err != nil {
		return nil, err
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread enters the sandbox's namespace, and a
		// goroutine that ends locked to its thread takes the thread with it.
		runtime.LockOSThread()
		c, err := dialIn(ctx, path, want, addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// dialIn moves the calling thread into the network namespace at path, if
// it still is the one noted, and connects to addr there. A socket stays in
// the namespace it was made in, whichever thread uses it later.
func dialIn(ctx context.Context, path string, want unix.Stat_t, addr string) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	if st.Dev != want.Dev || st.Ino != want.Ino {
		return nil, fmt.Errorf("network namespace: the container's process is gone: %w", sandbox.ErrGone)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter network namespace: %w", err)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

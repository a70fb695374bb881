package docker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
)

// TestHostRefusesLinkPlantedAtGuestSocket: a sandbox replaces its guest's
// socket with a link to a socket on the host (here a canary in a directory
// the sandbox cannot see). The host must refuse to connect, saying why,
// and the canary must see no connection.
func TestHostRefusesLinkPlantedAtGuestSocket(t *testing.T) {
	d := newDriver(t)
	ctx := context.Background()
	s, err := d.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	canaryDir, err := os.MkdirTemp("", "abc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(canaryDir) })
	canary, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(canaryDir, "canary.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()

	// The driver takes the socket's directory back once the guest listens;
	// before that, and in a sandbox made before it did, the directory is
	// the sandbox's. Give it back as it was then.
	hostSock := filepath.Join(stateOf(t, s).StateDir, "run", guest.SocketName)
	if err := os.Chmod(filepath.Dir(hostSock), 0o777); err != nil {
		t.Fatal(err)
	}
	// In the background, so the swap cannot race the exec's own answer.
	sock := docker.GuestStateDir + "/" + guest.SocketName
	line := "nohup sh -c 'sleep 0.2; rm -f " + sock + "; ln -s " + canary.Addr().String() + " " + sock + "' >/dev/null 2>&1 &"
	if res, err := s.Guest().Exec(ctx, guest.Shell(line)); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	waitLink(t, hostSock)

	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = s.Guest().Health(hctx)
	if !errors.Is(err, guest.ErrUnsafeSocket) || !strings.Contains(err.Error(), guest.SocketName+" is a symbolic link") {
		t.Fatalf("health: %v, want ErrUnsafeSocket naming the link", err)
	}
	canary.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := canary.Accept(); err == nil {
		c.Close()
		t.Fatal("the host connected to the canary socket")
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("canary accept: %v", err)
	}
}

// waitLink waits until path is a symbolic link.
func waitLink(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Lstat(path)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become a link within 30s (%v, %v)", path, fi, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

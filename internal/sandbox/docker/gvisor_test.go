package docker_test

import (
	"context"
	"errors"
	"image"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/doctor"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// gvisorDriver is a driver of the gvisor tier; the test skips when the
// engine has no runsc runtime (scripts/setup.sh registers it; CI runs it).
func gvisorDriver(t *testing.T) *docker.Driver {
	t.Helper()
	d := newDriver(t, func(c *docker.Config) { c.Runtime = docker.RuntimeGVisor })
	if err := d.Available(context.Background()); err != nil {
		if !errors.Is(err, sandbox.ErrIsolationUnavailable) {
			t.Fatal(err)
		}
		testenv.Missing(t, "the gvisor tier", err.Error())
	}
	return d
}

func TestGVisorConformance(t *testing.T) {
	d := gvisorDriver(t)
	if iso := d.Capabilities().Isolation; iso != sandbox.IsolationGVisor {
		t.Fatalf("isolation %q, want gvisor", iso)
	}
	sandboxtest.Run(t, d)
}

// TestGVisorKernel: the sandbox's kernel is gVisor's, by its own log.
func TestGVisorKernel(t *testing.T) {
	d := gvisorDriver(t)
	s, err := sandbox.Start(context.Background(), d, sandbox.Spec{Isolation: sandbox.IsolationGVisor}, sandbox.Binding{JobID: "gvisor-dmesg"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(context.Background())
	if iso := s.Handle().Isolation; iso != sandbox.IsolationGVisor {
		t.Errorf("handle isolation %q, want gvisor", iso)
	}
	res, err := s.Guest().Exec(context.Background(), guest.ExecRequest{Cmd: []string{"dmesg"}, TimeoutMS: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), doctor.GVisorBanner) {
		t.Fatalf("dmesg: exit %d, stdout %q, stderr %q; want gVisor's banner", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestTierRefusesAnother: a driver never runs a spec under another tier.
func TestTierRefusesAnother(t *testing.T) {
	d := newDriver(t)
	_, err := sandbox.Start(context.Background(), d, sandbox.Spec{Isolation: sandbox.IsolationGVisor}, sandbox.Binding{JobID: "wrong-tier"})
	if !errors.Is(err, sandbox.ErrIsolationUnavailable) {
		t.Fatalf("err = %v, want ErrIsolationUnavailable", err)
	}
}

// TestGVisorToolchains: threads, compilers, node and python run under
// runsc. runsc's --oci-seccomp must stay off: this runsc's filter ignores
// a rule's errnoRet, so clone3 fails with EPERM instead of the profile's
// ENOSYS, the C library does not fall back to clone, and no thread starts
// (docs/security.md#isolation-tiers).
func TestGVisorToolchains(t *testing.T) {
	d := gvisorDriver(t)
	s, err := d.Create(context.Background(), sandbox.Spec{Isolation: sandbox.IsolationGVisor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	checkToolchains(t, s.Guest())
}

// TestGVisorDesktop: the desktop stack runs under gVisor as it does in a
// container: screenshots, the pointer, a window typed into (a Tk one:
// xterm's pty fails under this runsc, see testenv.TyperWindow).
func TestGVisorDesktop(t *testing.T) {
	d := gvisorDriver(t)
	sb, err := sandbox.Start(context.Background(), d, sandbox.Spec{}, sandbox.Binding{WebBase: "/v1/jobs/test1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	g := sb.Guest()
	if _, err := g.DesktopStart(context.Background()); err != nil {
		t.Fatal(err)
	}
	var empty image.Image
	t.Run("screenshot", func(t *testing.T) { empty = checkScreenshots(t, g, 1024, 768) })
	t.Run("pointer", func(t *testing.T) { checkPointer(t, g) })
	t.Run("typing into a window", func(t *testing.T) { checkTyping(t, g, empty, testenv.TyperWindow) })
}

// TestGVisorSmallPidsLimit: a pids limit the container tier starts under
// starts a gvisor sandbox too, and leaves the sandbox's processes room
// to run. runsc's Sentry spends about a hundred of the host cgroup's pids
// on its own threads: under the bare limit a sandbox of 64 died before
// its guest answered, and one of 32 wedged runsc's start (the container
// stuck in Created, `docker rm -f` hanging).
func TestGVisorSmallPidsLimit(t *testing.T) {
	d := gvisorDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sandbox.Start(ctx, d, sandbox.Spec{Limits: sandbox.Limits{PidsLimit: 64}}, sandbox.Binding{JobID: "gvisor-pids"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(context.Background())
	// 16 processes at once, as under runc's limit of 64.
	res, err := s.Guest().Exec(ctx, guest.ExecRequest{Cmd: []string{"bash", "-c", "for i in $(seq 16); do sleep 2 & done; wait; echo ok"}, TimeoutMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

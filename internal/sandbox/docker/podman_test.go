package docker_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
)

// podmanSocket is where a rootful Podman service listens by default
// (podman system service, or podman.socket under systemd).
const podmanSocket = "/run/podman/podman.sock"

// podmanHost is the Podman service the Podman tests run against:
// AGENTBOX_TEST_PODMAN_HOST (.ci/run sets it), which must answer and be
// Podman, else the rootful service's socket when one answers there. With
// neither the tests skip, saying so.
func podmanHost(t *testing.T) string {
	t.Helper()
	host, required := os.LookupEnv("AGENTBOX_TEST_PODMAN_HOST")
	if !required {
		if _, err := os.Stat(podmanSocket); err != nil {
			t.Skip("skipping: no Podman service: set AGENTBOX_TEST_PODMAN_HOST (.ci/run starts one and sets it) or start one at " + podmanSocket)
		}
		host = "unix://" + podmanSocket
	}
	fail := t.Skipf
	if required {
		fail = t.Fatalf
	}
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		fail("podman client for %s: %v", host, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := docker.EngineInfo(ctx, cli)
	if err != nil || e.Name != "Podman" {
		fail("no Podman answers at %s: engine %+v, %v", host, e, err)
	}
	if _, err := cli.ImageInspect(ctx, podmanImage()); err != nil {
		fail("the sandbox image %s is not in Podman's store at %s (docker save %s | podman load): %v", podmanImage(), host, podmanImage(), err)
	}
	return host
}

// podmanImage is the image the Podman tests run: the core layer (a shell,
// coreutils and Python are all the suite needs), loaded from Docker's.
func podmanImage() string {
	if ref := os.Getenv("AGENTBOX_TEST_PODMAN_IMAGE"); ref != "" {
		return ref
	}
	return "agentbox-sandbox-core:latest"
}

// newPodmanDriver is newDriver on the Podman service.
func newPodmanDriver(t *testing.T, mod ...func(*docker.Config)) *docker.Driver {
	t.Helper()
	host := podmanHost(t)
	return openDriver(t, append([]func(*docker.Config){func(c *docker.Config) {
		c.Host, c.Image = host, podmanImage()
	}}, mod...)...)
}

// TestPodmanConformance runs the conformance suite on a rootful Podman
// service through its Docker-compatible API, and checks there what the
// driver does differently for Podman (engine_compat.go): agentbox's
// seccomp profile applied, the TCP guest transport, /tmp noexec as on
// Docker, List finding the driver's sandboxes, and the gvisor tier refused
// rather than run under runc.
func TestPodmanConformance(t *testing.T) {
	d := newPodmanDriver(t)
	if e, err := d.Engine(context.Background()); err != nil || e.Name != "Podman" {
		t.Fatalf("engine %+v, %v: want Podman", e, err)
	}
	t.Run("suite", func(t *testing.T) { sandboxtest.Run(t, d) })
	t.Run("TCPSeccompNoexecList", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("skipping: the tcp transport needs root")
		}
		d := newPodmanDriver(t, func(c *docker.Config) { c.Transport = sandbox.TransportTCP })
		// Bound at create, as a job's is: List leaves out a sandbox this
		// driver made unbound and has not bound yet.
		s, err := sandbox.Start(context.Background(), d, sandbox.Spec{}, sandbox.Binding{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Destroy(context.Background()) })
		checkRefused(t, s.Guest())
		res := command(t, s.Guest(), "sh", "-c", "cp /bin/true /tmp/t && /tmp/t; echo $?")
		if string(res.Stdout) != "126\n" {
			t.Errorf("a binary in /tmp ran (exit %q), want /tmp noexec as on Docker", res.Stdout)
		}
		// The reaper finds sandboxes by List, which knows its own by the
		// names Podman reports.
		ls, err := d.List(context.Background())
		if err != nil || !slices.ContainsFunc(ls, func(l sandbox.Listed) bool { return l.Handle.ID == s.Handle().ID && l.Running }) {
			t.Errorf("List: %+v, %v: want the running sandbox %s", ls, err, s.Handle().ID)
		}
	})
	t.Run("GVisorRefused", func(t *testing.T) {
		d := newPodmanDriver(t, func(c *docker.Config) { c.Runtime = docker.RuntimeGVisor })
		if err := d.Available(context.Background()); !errors.Is(err, sandbox.ErrIsolationUnavailable) {
			t.Errorf("Available: %v, want ErrIsolationUnavailable", err)
		}
		s, err := d.Create(context.Background(), sandbox.Spec{})
		if err == nil {
			s.Destroy(context.Background())
		}
		if !errors.Is(err, sandbox.ErrIsolationUnavailable) {
			t.Errorf("Create: %v, want ErrIsolationUnavailable", err)
		}
	})
}

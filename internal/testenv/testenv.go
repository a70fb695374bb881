// Package testenv decides whether tests that need real infrastructure run,
// skip or fail. On a laptop without Docker they skip with one line; in CI
// (CI=true or AGENTBOX_REQUIRE_DOCKER=1) a missing engine fails the test, so
// the suite never passes vacuously.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// DockerRequired reports whether a missing engine must fail tests.
func DockerRequired() bool {
	return os.Getenv("AGENTBOX_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true"
}

// Docker returns a client for the engine named by DOCKER_HOST (or the
// default socket), skipping or failing the test when it cannot be reached.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	c, err := DockerClient()
	if err != nil {
		unavailable(t, "docker client: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		unavailable(t, "docker engine not reachable: "+err.Error())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// DockerClient returns an engine client without checking it.
func DockerClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if DockerRequired() {
		t.Fatalf("%s (Docker is required here: CI=true or AGENTBOX_REQUIRE_DOCKER=1)", why)
	}
	t.Skipf("skipping: needs Docker: %s", why)
}

// Tool returns the path of the program a test needs (an absolute path,
// or a name looked up on PATH). Without it the test skips, or fails where
// Docker is required: CI installs every program the tests use
// (scripts/setup.sh; .ci/run adds the test-only sshd), so those tests
// never pass vacuously there. install says how to get it, e.g.
// "apt-get install openssh-server".
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	why := fmt.Sprintf("no %s (%s)", name, install)
	if DockerRequired() {
		t.Fatalf("%s (it is required here: CI=true or AGENTBOX_REQUIRE_DOCKER=1)", why)
	}
	t.Skipf("skipping: needs %s: %s", name, why)
	return ""
}

// DockerWithImage is Docker that also has the sandbox image (Image()); it
// skips or fails like Docker when the image is missing.
func DockerWithImage(t testing.TB) *client.Client {
	t.Helper()
	c := Docker(t)
	if _, err := c.ImageInspect(context.Background(), Image()); err != nil {
		unavailable(t, "sandbox image "+Image()+" missing (run: agentbox image build): "+err.Error())
	}
	return c
}

// Browser returns the path of a Chromium (or Chrome) binary for browser
// tests: AGENTBOX_BROWSER, else the first of chromium, chromium-browser,
// google-chrome on PATH. Without one it skips, or fails where Docker is
// required (CI installs Debian's chromium, so the browser tests never pass
// vacuously there).
func Browser(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AGENTBOX_BROWSER"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	why := "no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium; or set AGENTBOX_BROWSER)"
	if DockerRequired() {
		t.Fatalf("%s (a browser is required here: CI=true or AGENTBOX_REQUIRE_DOCKER=1)", why)
	}
	t.Skipf("skipping: needs a browser: %s", why)
	return ""
}

// Missing skips a test for what it needs and this machine lacks (a
// gVisor runtime, a tool), with why in one line; where Docker is required
// (CI installs everything the tests use) it fails instead, so a test never
// passes vacuously there.
func Missing(t testing.TB, what, why string) {
	t.Helper()
	if DockerRequired() {
		t.Fatalf("no %s: %s (it is required here: CI=true or AGENTBOX_REQUIRE_DOCKER=1)", what, why)
	}
	t.Skipf("skipping: needs %s: %s", what, why)
}

// TyperWindow opens a window titled abtest that runs the line typed into
// it on Return, as a shell in an xterm does, without a pty: a Tk entry.
// gVisor's runsc 20221219 fails xterm's pty (a pty master read before its
// replica is open fails with EIO there, gVisor issue 13738).
const TyperWindow = `python3 -c 'import subprocess, tkinter as tk
r = tk.Tk(); r.title("abtest"); r.geometry("500x300+100+100"); r.configure(bg="white")
e = tk.Entry(r, bg="white", relief="flat"); e.pack(fill="both", expand=1); e.focus_set()
e.bind("<Return>", lambda _: subprocess.run(["sh", "-c", e.get()]))
r.mainloop()' >/dev/null 2>&1 &`

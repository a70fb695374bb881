package microvm_test

import (
	"context"
	"fmt"
	"image"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The desktop and the Jupyter kernel in a real VM, driven through the
// guest as the agent's computer and python tools drive them. Under TCG a
// VM is 10–30 times slower than a container, so every wait is bounded
// generously, and awaited rather than slept. Timings are logged (go test
// -v) for docs/microvm.md.

// guiTimeout bounds one step of the desktop or the kernel under TCG.
const guiTimeout = 3 * time.Minute

// guiSandbox boots a VM for spec, destroyed when the test ends. It gets
// 1 GiB: the desktop, an xterm and the notebook server together take
// about 400 MiB in a container.
func guiSandbox(t *testing.T, spec sandbox.Spec, bind ...sandbox.Binding) *guest.Client {
	t.Helper()
	d := newDriver(t, t.TempDir())
	spec.Limits.MemoryBytes = 1 << 30
	start := time.Now()
	var b sandbox.Binding
	if len(bind) > 0 {
		b = bind[0]
	}
	s, err := sandbox.Start(context.Background(), d, spec, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	t.Logf("VM booted in %v", time.Since(start).Round(time.Millisecond))
	return s.Guest()
}

// plainVM is the VM TestMicroVMJupyter and TestMicroVMLikeAContainer
// share: each boot costs tens of seconds under TCG, and neither test is
// about what the other leaves in the VM (a notebook server and its kernel
// hold no terminal, so the first pty is still /dev/pts/0). It is
// destroyed after the package's tests (TestMain).
var plainVM struct {
	once sync.Once
	dir  string
	s    sandbox.Sandbox
	err  error
}

// sharedPlainSandbox boots plainVM on first use: 1 GiB, as guiSandbox
// gives, and the notebook server's web base.
func sharedPlainSandbox(t *testing.T) *guest.Client {
	t.Helper()
	testenv.Tool(t, "qemu-system-x86_64", microvm.Install)
	assets(t) // skips without an engine, before the VM is tried
	plainVM.once.Do(func() {
		if plainVM.dir, plainVM.err = os.MkdirTemp("", "abvm"); plainVM.err != nil {
			return
		}
		d := newDriver(t, plainVM.dir)
		start := time.Now()
		plainVM.s, plainVM.err = sandbox.Start(context.Background(), d, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 1 << 30}}, sandbox.Binding{WebBase: "/v1/jobs/vm2"})
		t.Logf("VM booted in %v", time.Since(start).Round(time.Millisecond))
	})
	if plainVM.s == nil { // made by an earlier test that failed
		t.Fatalf("shared VM: %v", plainVM.err)
	}
	return plainVM.s.Guest()
}

// destroyPlainVM destroys plainVM, if it was made, and its state.
func destroyPlainVM() {
	if plainVM.s != nil {
		if err := plainVM.s.Destroy(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "destroy the shared VM:", err)
		}
	}
	if plainVM.dir != "" {
		os.RemoveAll(plainVM.dir)
	}
}

// TestMicroVMDesktop: in a VM the desktop starts at the size the spec
// asks for, screenshots are PNGs of that size, a window opened from the
// shell takes a click and typed keys (a command typed into an xterm
// runs), and noVNC is served, with a VNC server behind its WebSocket,
// through the guest's proxy.
func TestMicroVMDesktop(t *testing.T) {
	const w, h = 1280, 800
	g := guiSandbox(t, sandbox.Spec{Display: sandbox.Display{Width: w, Height: h}}, sandbox.Binding{WebBase: "/v1/jobs/vm1"})
	ctx, cancel := context.WithTimeout(context.Background(), guiTimeout)
	defer cancel()
	start := time.Now()
	info, err := g.DesktopStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("desktop started in %v", time.Since(start).Round(time.Millisecond))
	if info != (guest.DesktopInfo{Display: ":1", Width: w, Height: h}) {
		t.Fatalf("desktop info %+v, want :1 at %dx%d", info, w, h)
	}
	var empty image.Image
	t.Run("screenshot", func(t *testing.T) { empty = checkScreenshot(t, g, w, h) })
	t.Run("xterm takes a click and keys", func(t *testing.T) { checkTypedCommand(t, g, empty) })
	t.Run("noVNC through the proxy", func(t *testing.T) { checkNoVNC(t, g) })
}

// checkScreenshot takes screenshots of a w×h screen and returns the last.
func checkScreenshot(t *testing.T, g *guest.Client, w, h int) image.Image {
	var img image.Image
	var took time.Duration
	const n = 3
	for range n {
		start := time.Now()
		res := testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot"})
		took += time.Since(start)
		img = testenv.DecodePNG(t, res.PNG)
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h || res.Width != w || res.Height != h {
			t.Fatalf("screenshot %v of a %dx%d screen, want %dx%d", b, res.Width, res.Height, w, h)
		}
	}
	t.Logf("screenshot %dx%d: %v each", w, h, (took / n).Round(time.Millisecond))
	return img
}

// checkTypedCommand opens an xterm from the agent's shell, waits for it on
// screen, clicks into it and types a command, which must run.
func checkTypedCommand(t *testing.T, g *guest.Client, empty image.Image) {
	start := time.Now()
	run(t, g, "xterm -T abtest -geometry 80x24+100+100 >/dev/null 2>&1 &")
	if out, code := run(t, g, "timeout 150 xdotool search --sync --onlyvisible --name abtest"); code != 0 {
		t.Fatalf("the xterm never appeared: %s", out)
	}
	testenv.Await(t, guiTimeout, "the xterm in a screenshot", func() bool {
		img := testenv.DecodePNG(t, testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot"}).PNG)
		return testenv.DiffersIn(img, empty, image.Rect(110, 110, 300, 300))
	})
	t.Logf("xterm on screen %v after it was started", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	testenv.Desktop(t, g, guest.DesktopAction{Action: "left_click", Coordinate: &guest.Point{X: 300, Y: 200}})
	testenv.Desktop(t, g, guest.DesktopAction{Action: "type", Text: "echo typed-in-a-vm > /workspace/typed.txt"})
	testenv.Desktop(t, g, guest.DesktopAction{Action: "key", Text: "Return"})
	testenv.Await(t, guiTimeout, "the typed command's file", func() bool {
		out, _ := run(t, g, "cat /workspace/typed.txt 2>/dev/null")
		return out == "typed-in-a-vm"
	})
	t.Logf("click, type and Return to the command's file: %v", time.Since(start).Round(time.Millisecond))
}

// checkNoVNC gets noVNC's page through the guest's proxy, as the host's
// API does, and the VNC server's greeting over its WebSocket.
func checkNoVNC(t *testing.T, g *guest.Client) {
	hc := &http.Client{Transport: g.Transport(), Timeout: guiTimeout}
	resp, err := hc.Get("http://sandbox/proxy/desktop/vnc.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "noVNC") {
		t.Fatalf("vnc.html: status %d, body %.200q", resp.StatusCode, body)
	}
	testenv.RFBGreeting(t, hc, guiTimeout)
}

// TestMicroVMJupyter: in a VM the notebook server answers through the
// guest's proxy, and the Python kernel starts on first use and keeps its
// state between executions.
func TestMicroVMJupyter(t *testing.T) {
	g := sharedPlainSandbox(t)
	start := time.Now()
	hc := &http.Client{Transport: g.Transport(), Timeout: guiTimeout}
	resp, err := hc.Get("http://sandbox/proxy/jupyter/api")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"version"`) {
		t.Fatalf("jupyter api: status %d, body %.200q", resp.StatusCode, body)
	}
	server := time.Since(start)
	execute := func(code string) (guest.KernelResult, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := g.KernelExecute(context.Background(), guest.KernelRequest{Code: code, TimeoutMS: guiTimeout.Milliseconds()})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.Error != nil || res.Restarted != "" {
			t.Fatalf("%q: error %+v, restarted %q", code, res.Error, res.Restarted)
		}
		return res, time.Since(start)
	}
	_, first := execute("import sys; x = 41")
	res, second := execute("print(x + 1, sys.platform)")
	if res.Stdout != "42 linux\n" {
		t.Fatalf("second execution printed %q, want the first's x + 1: \"42 linux\\n\"", res.Stdout)
	}
	t.Logf("notebook server answering through the proxy: %v; kernel started and first execution done: %v; second execution %v",
		server.Round(time.Millisecond), first.Round(time.Millisecond), second.Round(time.Millisecond))
}

// run runs a shell line in the VM and returns its trimmed stdout.
func run(t *testing.T, g *guest.Client, line string) (string, int) {
	t.Helper()
	res, err := g.Exec(context.Background(), guest.Shell(line))
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return strings.TrimSpace(string(res.Stdout) + string(res.Stderr)), res.ExitCode
}

// TestMicroVMLikeAContainer: what a container's runtime gives and
// programs assume is there in a VM too: localhost resolves (servers the
// agent starts and its clients), the host name is set, /dev/fd exists
// (bash's process substitution), and ptys open (xterm, script).
func TestMicroVMLikeAContainer(t *testing.T) {
	g := sharedPlainSandbox(t)
	for _, tt := range []struct{ line, want string }{
		{"getent hosts localhost >/dev/null && echo resolved", "resolved"},
		{"python3 -c 'import socket; print(socket.gethostbyname(\"localhost\"))'", "127.0.0.1"},
		{"hostname; cat /etc/hostname", "sandbox\nsandbox"},
		{"cat <(echo substituted)", "substituted"},
		{"echo in | cat /dev/stdin", "in"},
		{"script -qec 'tty' /dev/null | tr -d '\\r'", "/dev/pts/0"},
	} {
		if out, code := run(t, g, tt.line); code != 0 || out != tt.want {
			t.Errorf("%s: %q, exit %d; want %q", tt.line, out, code, tt.want)
		}
	}
}

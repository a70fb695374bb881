package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"image"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The desktop and Jupyter services in a real sandbox: started on first use,
// driven through the guest, reachable through its proxy, restarted after a
// crash. Timings and memory are logged (go test -v) for the record.

// desktopSandbox creates a sandbox for spec, destroyed when the test ends.
func desktopSandbox(t *testing.T, spec sandbox.Spec, bind ...sandbox.Binding) *guest.Client {
	t.Helper()
	d := newDriver(t)
	sb, err := sandbox.Start(context.Background(), d, spec, bindingOf(bind))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb.Guest()
}

// run runs a shell line in the sandbox and returns its stdout.
func run(t *testing.T, g *guest.Client, line string) (string, int) {
	t.Helper()
	res, err := g.Exec(context.Background(), guest.Shell(line))
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return strings.TrimSpace(string(res.Stdout)), res.ExitCode
}

func screenshot(t *testing.T, g *guest.Client) (guest.DesktopResult, image.Image) {
	t.Helper()
	res := testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot"})
	return res, testenv.DecodePNG(t, res.PNG)
}

// cgroupMemory is the sandbox's memory use as its cgroup counts it.
func cgroupMemory(t *testing.T, g *guest.Client) string {
	out, _ := run(t, g, "cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.current")
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		return "unknown (" + out + ")"
	}
	return strconv.FormatInt(n>>20, 10) + " MiB"
}

func TestDesktopInSandbox(t *testing.T) {
	g := desktopSandbox(t, sandbox.Spec{}, sandbox.Binding{WebBase: "/v1/jobs/test1"})
	ctx := context.Background()
	h, err := g.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"-x Xvfb", "-x x11vnc", "-x openbox", "-f websockify", "-f jupyter-notebook"} {
		if out, code := run(t, g, "pgrep "+p); code == 0 {
			t.Fatalf("pgrep %s found %s before any desktop use", p, out)
		}
	}
	rss, _ := run(t, g, "grep VmRSS /proc/"+strconv.Itoa(h.PID)+"/status")
	t.Logf("idle: guest %s; sandbox cgroup %s", strings.Join(strings.Fields(rss)[1:], " "), cgroupMemory(t, g))

	start := time.Now()
	info, err := g.DesktopStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("desktop stack started in %v; sandbox cgroup %s", time.Since(start).Round(time.Millisecond), cgroupMemory(t, g))
	if info != (guest.DesktopInfo{Display: ":1", Width: 1024, Height: 768}) {
		t.Fatalf("desktop info %+v", info)
	}
	if again, err := g.DesktopStart(ctx); err != nil || again != info {
		t.Fatalf("second start: %+v, %v", again, err)
	}

	var empty image.Image
	t.Run("screenshot", func(t *testing.T) { empty = checkScreenshots(t, g, 1024, 768) })
	t.Run("pointer", func(t *testing.T) { checkPointer(t, g) })
	t.Run("xterm and typing", func(t *testing.T) { checkXtermTyping(t, g, empty) })
	t.Run("bad input", func(t *testing.T) { checkBadInput(t, g) })
	t.Run("proxy", func(t *testing.T) { checkProxy(t, g) })
	t.Run("X server restarted", func(t *testing.T) { checkXRestart(t, g) })
}

// checkScreenshots checks full and scaled screenshots and returns a full one.
func checkScreenshots(t *testing.T, g *guest.Client, w, h int) image.Image {
	var full guest.DesktopResult
	var took time.Duration
	for range 5 {
		start := time.Now()
		full = testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot"})
		took += time.Since(start)
	}
	img := testenv.DecodePNG(t, full.PNG)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h || full.Width != w || full.Height != h {
		t.Fatalf("screenshot %v of a %dx%d screen, want %dx%d", b, full.Width, full.Height, w, h)
	}
	sw, sh := w/2, h/2
	start := time.Now()
	scaled := testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot", ScaleWidth: sw, ScaleHeight: sh})
	scaledTook := time.Since(start)
	if b := testenv.DecodePNG(t, scaled.PNG).Bounds(); b.Dx() != sw || b.Dy() != sh || scaled.Width != w {
		t.Fatalf("scaled screenshot %v (screen %dx%d), want %dx%d", b, scaled.Width, scaled.Height, sw, sh)
	}
	big := testenv.Desktop(t, g, guest.DesktopAction{Action: "screenshot", ScaleWidth: 4 * w, ScaleHeight: 4 * h})
	if b := testenv.DecodePNG(t, big.PNG).Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("screenshot scaled up to %v", b)
	}
	t.Logf("screenshot %dx%d: %v each (%d bytes); scaled to %dx%d: %v (%d bytes)",
		w, h, (took / 5).Round(time.Millisecond), len(full.PNG), sw, sh, scaledTook.Round(time.Millisecond), len(scaled.PNG))
	return img
}

func checkPointer(t *testing.T, g *guest.Client) {
	res := testenv.Desktop(t, g, guest.DesktopAction{Action: "mouse_move", Coordinate: &guest.Point{X: 200, Y: 150}})
	if res.Cursor != (guest.Point{X: 200, Y: 150}) {
		t.Fatalf("cursor after mouse_move = %+v", res.Cursor)
	}
	if res := testenv.Desktop(t, g, guest.DesktopAction{Action: "cursor_position"}); res.Cursor != (guest.Point{X: 200, Y: 150}) || res.PNG != nil {
		t.Fatalf("cursor_position = %+v (png %d bytes)", res.Cursor, len(res.PNG))
	}
	// The pointer is drawn into screenshots where it is: two screenshots
	// with the pointer in two places differ around both places.
	at := func(p guest.Point) image.Image {
		return testenv.DecodePNG(t, testenv.Desktop(t, g, guest.DesktopAction{Action: "mouse_move", Coordinate: &p, Screenshot: true}).PNG)
	}
	p1, p2 := guest.Point{X: 700, Y: 500}, guest.Point{X: 850, Y: 650}
	img1, img2 := at(p1), at(p2)
	for _, p := range []guest.Point{p1, p2} {
		if box := image.Rect(p.X-24, p.Y-24, p.X+24, p.Y+24); !testenv.DiffersIn(img1, img2, box) {
			t.Errorf("no pointer drawn near %v: screenshots with the pointer there and elsewhere are the same in %v", p, box)
		}
	}
	res = testenv.Desktop(t, g, guest.DesktopAction{Action: "left_click", Coordinate: &guest.Point{X: 1023, Y: 767}, Screenshot: true})
	if res.Cursor != (guest.Point{X: 1023, Y: 767}) || len(res.PNG) == 0 {
		t.Fatalf("click with screenshot: cursor %+v, png %d bytes", res.Cursor, len(res.PNG))
	}
}

// checkXtermTyping opens an xterm from the agent's shell, sees it appear,
// and types a command into it that creates a file.
func checkXtermTyping(t *testing.T, g *guest.Client, empty image.Image) {
	checkTyping(t, g, empty, "xterm -T abtest -geometry 80x24+100+100 >/dev/null 2>&1 &")
}

// checkTyping opens a window titled abtest with open, clicks into it and
// types a command, which must run.
func checkTyping(t *testing.T, g *guest.Client, empty image.Image, open string) {
	if _, code := run(t, g, open); code != 0 {
		t.Fatalf("%s: exit %d", open, code)
	}
	if out, code := run(t, g, "timeout 20 xdotool search --sync --onlyvisible --name abtest"); code != 0 {
		t.Fatalf("the window never appeared: %s", out)
	}
	testenv.Await(t, 30*time.Second, "the window in a screenshot", func() bool {
		_, img := screenshot(t, g)
		// Inside the window, away from where the pointer was and is.
		return testenv.DiffersIn(img, empty, image.Rect(110, 110, 300, 300))
	})
	testenv.Desktop(t, g, guest.DesktopAction{Action: "left_click", Coordinate: &guest.Point{X: 300, Y: 200}})
	testenv.Desktop(t, g, guest.DesktopAction{Action: "type", Text: "echo 'hi there' > " + docker.WorkspacePath + "/typed.txt"})
	testenv.Desktop(t, g, guest.DesktopAction{Action: "key", Text: "Return"})
	testenv.Await(t, 30*time.Second, "the typed command's file", func() bool {
		out, _ := run(t, g, "cat typed.txt 2>/dev/null")
		return out == "hi there"
	})
}

func checkBadInput(t *testing.T, g *guest.Client) {
	for name, a := range map[string]guest.DesktopAction{
		"unknown action":     {Action: "explode"},
		"off screen":         {Action: "left_click", Coordinate: &guest.Point{X: 1024, Y: 0}},
		"missing coordinate": {Action: "mouse_move"},
		"type without text":  {Action: "type"},
		"bad scroll":         {Action: "scroll", ScrollDirection: "diagonal"},
		"long wait":          {Action: "wait", DurationMS: 101_000},
		"unknown key":        {Action: "key", Text: "NoSuchKeyAtAll"},
	} {
		_, err := g.Desktop(context.Background(), a)
		if !errors.Is(err, guest.ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
}

// checkProxy reaches noVNC (page, redirect, WebSocket to the VNC server)
// and Jupyter through the guest's proxy, as the host's API does.
func checkProxy(t *testing.T, g *guest.Client) {
	hc := &http.Client{Transport: g.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	body, status := get(t, hc, "/proxy/desktop/vnc.html")
	if status != http.StatusOK || !strings.Contains(body, "noVNC") {
		t.Fatalf("vnc.html: status %d, body %.200q", status, body)
	}
	resp, err := hc.Get("http://sandbox/proxy/desktop/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := "vnc.html?autoconnect=1&resize=scale&reconnect=1&path=v1/jobs/test1/desktop/websockify"
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Fatalf("desktop root: %d to %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	testenv.RFBGreeting(t, hc, 20*time.Second)

	start := time.Now()
	body, status = get(t, hc, "/proxy/jupyter/api")
	var v struct{ Version string }
	if status != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil || v.Version == "" {
		t.Fatalf("jupyter api: status %d, body %.200q", status, body)
	}
	t.Logf("jupyter %s started in %v; sandbox cgroup with desktop, xterm and jupyter: %s",
		v.Version, time.Since(start).Round(time.Millisecond), cgroupMemory(t, g))
}

func get(t *testing.T, hc *http.Client, path string) (string, int) {
	t.Helper()
	resp, err := hc.Get("http://sandbox" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode
}

func checkXRestart(t *testing.T, g *guest.Client) {
	before, _ := run(t, g, "pgrep -x Xvfb")
	if _, code := run(t, g, "pkill -9 -x Xvfb"); code != 0 {
		t.Fatal("no Xvfb to kill")
	}
	res, img := screenshot(t, g)
	if b := img.Bounds(); b.Dx() != 1024 || res.Width != 1024 {
		t.Fatalf("screenshot after restart: %v", b)
	}
	after, _ := run(t, g, "pgrep -x Xvfb")
	if after == "" || after == before {
		t.Fatalf("Xvfb pid %q before, %q after", before, after)
	}
	if res := testenv.Desktop(t, g, guest.DesktopAction{Action: "mouse_move", Coordinate: &guest.Point{X: 10, Y: 20}}); res.Cursor != (guest.Point{X: 10, Y: 20}) {
		t.Fatalf("cursor after restart %+v", res.Cursor)
	}
}

func TestDesktopCustomSize(t *testing.T) {
	g := desktopSandbox(t, sandbox.Spec{Display: sandbox.Display{Width: 1280, Height: 800}})
	info, err := g.DesktopStart(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Width != 1280 || info.Height != 800 {
		t.Fatalf("desktop info %+v, want 1280x800", info)
	}
	checkScreenshots(t, g, 1280, 800)
	_, err = g.Desktop(context.Background(), guest.DesktopAction{Action: "mouse_move", Coordinate: &guest.Point{X: 1279, Y: 800}})
	if !errors.Is(err, guest.ErrBadRequest) {
		t.Fatalf("off-screen move: err = %v, want ErrBadRequest", err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/testenv"
)

// The colour the job paints the sandbox's desktop with, so a screenshot of
// the browser shows whether the remote desktop really reached it.
const desktopColour = "#ff00ff"

// desktopJob waits for the desktop (started by the first viewer), paints
// its background and opens an xterm, then stays alive for the viewer.
var desktopJob = `for i in $(seq 600); do [ -S /tmp/.X11-unix/X1 ] && break; sleep 0.1; done
sleep 1; xsetroot -solid '` + desktopColour + `'; xterm -geometry 60x10+40+40 & sleep 300`

// TestBrowserDesktop opens a running job's desktop through the API in a real
// headless Chromium: without auth the page is refused; with a viewer link it
// loads noVNC, connects through the API's proxy and the guest to the
// sandbox's display, and the browser's screenshot shows the remote desktop.
func TestBrowserDesktop(t *testing.T) {
	t.Parallel()
	browser := testenv.Browser(t)
	s := newServer(t)
	s.start()
	ctx := newBrowser(t, browser) // first: the link is opened while the sandbox may be starting
	id, code := s.submit(desktopJob)
	if code != http.StatusAccepted && code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	waitUntil(t, time.Minute, func() bool { return s.job(id).Status == "running" })
	defer s.do("POST", "/v1/jobs/"+id+"/cancel", nil, nil)

	// Without auth: refused, in the browser as with a plain request.
	status := navigateStatus(t, ctx, s.url+"/v1/jobs/"+id+"/desktop/")
	if status != http.StatusUnauthorized {
		t.Fatalf("desktop without auth: status %d, want 401", status)
	}

	links := s.viewerLinks(id)
	if strings.Contains(links.DesktopURL, testToken) {
		t.Fatalf("viewer link carries the API token: %s", links.DesktopURL)
	}

	// With the link: noVNC loads and connects; the ticket leaves the address bar.
	if err := chromedp.Do(ctx, chromedp.Navigate(absolute(s.url, links.DesktopURL))); err != nil {
		t.Fatal(err)
	}
	if err := pollPage(ctx, `document.documentElement.classList.contains("noVNC_connected")`, 60*time.Second); err != nil {
		t.Fatalf("noVNC did not connect: %v\nserver log:\n%s", err, s.logs)
	}
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(location, "ticket=") || !strings.Contains(location, "/v1/jobs/"+id+"/desktop/vnc.html") {
		t.Errorf("location after login: %s", location)
	}

	// The remote desktop is on screen: most of the canvas has the job's colour.
	var shot []byte
	var share float64
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		if shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
			t.Fatal(err)
		}
		if share = colourShare(t, shot, 0xff, 0x00, 0xff); share > 0.3 {
			break
		}
		time.Sleep(300 * time.Millisecond) // the job paints once the desktop is up
	}
	saveArtifact(t, "desktop.png", shot)
	if share <= 0.3 {
		t.Fatalf("the browser's screenshot is %.0f%% desktop colour, want > 30%%", 100*share)
	}
	t.Logf("browser screenshot: %.0f%% of pixels show the remote desktop's background", 100*share)
	if n := s.sandboxes(); n != 1 {
		t.Fatalf("%d sandboxes for the running job, want 1", n)
	}
	if ports := s.publishedPorts(); ports != "" {
		t.Errorf("the sandbox publishes ports %q; the desktop must be reached only through the API", ports)
	}

	// The Jupyter UI loads the same way, with its own single-use ticket.
	if err := chromedp.Do(ctx, chromedp.Navigate(absolute(s.url, links.JupyterURL))); err != nil {
		t.Fatal(err)
	}
	if err := pollPage(ctx, `!!document.querySelector("#notebook_list, #ipython-main-app")`, 60*time.Second); err != nil {
		t.Fatalf("jupyter UI did not load: %v\nserver log:\n%s", err, s.logs)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jupyter page title %q", title)

	// A used ticket does not open the door again, even in a fresh browser.
	fresh := newBrowser(t, browser)
	if status := navigateStatus(t, fresh, absolute(s.url, links.DesktopURL)); status != http.StatusUnauthorized {
		t.Errorf("reused ticket: status %d, want 401", status)
	}
}

// TestBrowserViewOrigins: with AGENTBOX_VIEW_URL each job's views have an
// origin of their own (job-<hex>.localhost here, which Chromium resolves to
// the loopback address). The desktop and Jupyter work there as on the API's
// origin, and a page of one job's sandbox can read neither another job's
// views, although the browser is signed into both, nor the API.
func TestBrowserViewOrigins(t *testing.T) {
	t.Parallel()
	browser := testenv.Browser(t)
	s := newServer(t)
	_, port, _ := strings.Cut(strings.TrimPrefix(s.url, "http://"), ":")
	s.env = append(s.env, "AGENTBOX_VIEW_URL=http://{job}.localhost:"+port)
	s.start()
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs)
		}
	}()
	// The browser starts first, so that the links are opened as soon as
	// the jobs run, while their sandboxes may still be starting: the API
	// waits for them.
	ctx := newBrowser(t, browser)
	a, code := s.submit(desktopJob)
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	b, _ := s.submit("sleep 300")
	waitUntil(t, time.Minute, func() bool { return s.job(a).Status == "running" && s.job(b).Status == "running" })
	defer s.do("POST", "/v1/jobs/"+a+"/cancel", nil, nil)
	defer s.do("POST", "/v1/jobs/"+b+"/cancel", nil, nil)
	la, lb := s.viewerLinks(a), s.viewerLinks(b)
	originA := "http://" + strings.ReplaceAll(a, "_", "-") + ".localhost:" + port
	if !strings.HasPrefix(la.DesktopURL, originA+"/v1/jobs/"+a+"/desktop/?ticket=") {
		t.Fatalf("desktop link %q is not on the job's origin %s", la.DesktopURL, originA)
	}

	connect := func(link string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
			t.Fatal(err)
		}
		if err := pollPage(ctx, `document.documentElement.classList.contains("noVNC_connected")`, 60*time.Second); err != nil {
			t.Fatalf("noVNC did not connect at %s: %v", link, err)
		}
	}
	connect(lb.DesktopURL) // signed into job B's views too
	connect(la.DesktopURL)
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasPrefix(location, originA+"/v1/jobs/"+a+"/desktop/vnc.html") {
		t.Fatalf("location %q, %v", location, err)
	}

	// Script in job A's page, as a sandbox's page could run it: fetches,
	// whose answers the browser keeps from the page, and then a no-cors
	// fetch and a script tag, which reach job B's view all the same and
	// must be refused by the server.
	probe := `(async () => {
		const out = {};
		for (const [name, u] of Object.entries(%s)) {
			try { const r = await fetch(u, {credentials: "include"}); out[name] = "read " + r.status; }
			catch (e) { out[name] = "blocked"; }
		}
		await fetch(%[2]q + "?no-cors", {credentials: "include", mode: "no-cors"}).catch(() => {});
		await new Promise(done => {
			const el = document.createElement("script");
			el.src = %[2]q + "?script";
			el.onload = el.onerror = done;
			document.head.appendChild(el);
		});
		return out;
	})()`
	otherView := strings.SplitN(lb.DesktopURL, "/v1/", 2)[0] + "/v1/jobs/" + b + "/desktop/vnc.html"
	targets, _ := json.Marshal(map[string]string{
		"own":   "/v1/jobs/" + a + "/desktop/vnc.html",
		"other": otherView,
		"api":   s.url + "/v1/jobs",
	})
	refusedBefore := s.viewRefusals()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](fmt.Sprintf(probe, targets, otherView), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got["own"] != "read 200" || got["other"] != "blocked" || got["api"] != "blocked" {
		t.Errorf("fetches from job A's page: %v; want its own view read, job B's view and the API blocked", got)
	}
	if refused := s.viewRefusals() - refusedBefore; refused < 3 {
		t.Errorf("the server refused %d of the 3 requests job A's page made to job B's view", refused)
	}
	t.Logf("fetches from job A's page: %v", got)

	// Jupyter opens on the job's origin too.
	if err := chromedp.Do(ctx, chromedp.Navigate(la.JupyterURL)); err != nil {
		t.Fatal(err)
	}
	if err := pollPage(ctx, `!!document.querySelector("#notebook_list, #ipython-main-app")`, 60*time.Second); err != nil {
		t.Fatalf("jupyter UI did not load: %v", err)
	}
	// The API's own host no longer serves the views to a browser.
	if status := navigateStatus(t, ctx, s.url+"/v1/jobs/"+a+"/desktop/vnc.html"); status != http.StatusUnauthorized {
		t.Errorf("the view on the API's host: %d, want 401", status)
	}
}

// viewRefusals counts the desktop requests the server refused (401, 403),
// from its metrics.
func (s *server) viewRefusals() int {
	s.t.Helper()
	n := 0
	for _, line := range strings.Split(string(s.get(s.t, "/metrics", http.StatusOK)), "\n") {
		if strings.HasPrefix(line, "agentbox_http_requests_total{") && strings.Contains(line, "/desktop/{path...}") &&
			(strings.Contains(line, `code="401"`) || strings.Contains(line, `code="403"`)) {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			n += int(v)
		}
	}
	return n
}

// newBrowser starts a headless Chromium for the test.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// pollPage waits until the JavaScript expression is true in the tab's page.
// A poll is bound to one execution context: when the page it started in is
// replaced (Navigate can return before chromedp has seen the new page's
// context, and a redirected login replaces the page), it fails with a
// context error, and is started again in the new page.
func pollPage(ctx context.Context, expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return chromedp.ErrPollingTimeout
		}
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(left)))
		if err == nil {
			return nil
		}
		if !contextLost(err) {
			return fmt.Errorf("%w; the page: %s", err, describePage(ctx))
		}
		// The new page's context is announced by an event of its own;
		// give it a moment rather than flood the browser with retries.
		time.Sleep(50 * time.Millisecond)
	}
}

// describePage says where the tab is and what it shows, for a failure.
func describePage(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + " " + JSON.stringify(document.title) + " class=" + JSON.stringify(document.documentElement.className) + " text=" + JSON.stringify((document.body ? document.body.innerText : "").slice(0, 400))`))
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return page
}

// contextLost reports whether err says the page a script ran in is gone.
func contextLost(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Inspected target navigated or closed")
}

// navigateStatus loads url and returns the HTTP status of the document.
func navigateStatus(t *testing.T, ctx context.Context, url string) int64 {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(url))
	if err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	if resp == nil {
		t.Fatalf("navigate %s: no response", url)
	}
	return resp.Status
}

func absolute(base, link string) string {
	if strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") {
		return link
	}
	return base + link
}

// colourShare is the share of the PNG's pixels within a small distance of
// the colour r, g, b.
func colourShare(t *testing.T, shot []byte, r, g, b uint8) float64 {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bounds := img.Bounds()
	match := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			if near(img, x, y, r, g, b) {
				match++
			}
		}
	}
	total := ((bounds.Dx() + 1) / 2) * ((bounds.Dy() + 1) / 2)
	return float64(match) / float64(total)
}

func near(img image.Image, x, y int, r, g, b uint8) bool {
	pr, pg, pb, _ := img.At(x, y).RGBA()
	d := func(a uint32, c uint8) int { v := int(a>>8) - int(c); return v * v }
	return d(pr, r)+d(pg, g)+d(pb, b) < 3*24*24
}

// saveArtifact keeps a test output where CI can show it: under
// AGENTBOX_TEST_ARTIFACTS if set, else in the test's temp dir.
func saveArtifact(t *testing.T, name string, data []byte) {
	dir := os.Getenv("AGENTBOX_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Logf("save %s: %v", p, err)
		return
	}
	t.Logf("saved %s", p)
}

// publishedPorts lists the ports the server's sandboxes publish on the host
// (docker ps's Ports column), empty when none does.
func (s *server) publishedPorts() string {
	s.t.Helper()
	out, err := exec.Command("docker", "ps", "--format", "{{.Ports}}", "--filter", "label=io.agentbox.instance=servetest-"+filepath.Base(s.dataDir)).Output()
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

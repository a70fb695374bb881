package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/testenv"
)

// The web UI's browser tests: headless Chromium through the real server.
// Every page a test visits is screenshotted into screenshotDir, and any
// console error, uncaught exception or CSP violation fails the test.

// screenshotDir is where the UI tests save what the browser showed:
// AGENTBOX_SCREENSHOTS, else test-output/screenshots at the repository's
// root (ignored by git).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("AGENTBOX_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-output", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// uiTab is a browser tab on the server's UI.
type uiTab struct {
	t   *testing.T
	ctx context.Context
	s   *server

	mu       sync.Mutex
	problems []string // console errors and exceptions
}

// openUI starts a browser for the server s and watches its console.
func openUI(t *testing.T, s *server) *uiTab {
	t.Helper()
	tab := &uiTab{t: t, ctx: newBrowser(t, testenv.Browser(t)), s: s}
	messages := chromedp.Console(tab.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if (m.Type == "error" || m.IsException()) && !tab.expected(m.Text) {
				tab.mu.Lock()
				tab.problems = append(tab.problems, fmt.Sprintf("%s %s (%s)", m.Type, m.Text, m.URL))
				tab.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		for _, p := range tab.problems {
			t.Errorf("browser console: %s", p)
		}
	})
	return tab
}

// expected reports whether a console error is one a test caused on
// purpose: the browser logs every 4xx a page loads, and the tests load
// some (a wrong token's 401).
func (tab *uiTab) expected(text string) bool {
	return strings.Contains(text, "status of 401") || strings.Contains(text, "status of 403") ||
		strings.Contains(text, "status of 409") || strings.Contains(text, "status of 422") || strings.Contains(text, "status of 400")
}

// run runs chromedp actions, failing the test on an error.
func (tab *uiTab) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	if err := chromedp.Do(tab.ctx, actions...); err != nil {
		tab.t.Fatalf("%s: %v; the page: %s", what, err, describePage(tab.ctx))
	}
}

// wait waits until the JavaScript expression is true.
func (tab *uiTab) wait(what, expr string, timeout time.Duration) {
	tab.t.Helper()
	if err := pollPage(tab.ctx, expr, timeout); err != nil {
		tab.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// eval returns the JavaScript expression's value.
func evalUI[T any](tab *uiTab, expr string) T {
	tab.t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tab.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// shot saves a full-page screenshot as <test>-<name>.png.
func (tab *uiTab) shot(name string) {
	tab.t.Helper()
	// A page just navigated to may not be laid out yet ("Cannot take
	// screenshot with 0 width").
	tab.wait("a laid-out page", `document.readyState === 'complete' && document.documentElement.clientWidth > 0`, 20*time.Second)
	png, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tab.t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(screenshotDir(tab.t), strings.ReplaceAll(tab.t.Name(), "/", "-")+"-"+name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		tab.t.Fatal(err)
	}
	tab.t.Logf("screenshot: %s", file)
}

// signIn signs in through the form with token and waits for the page
// after it.
func (tab *uiTab) signIn(token string) {
	tab.t.Helper()
	tab.run("open the sign-in page", chromedp.Navigate(tab.s.url+"/"))
	tab.wait("the sign-in form", `!!document.querySelector('input[type=password]')`, 20*time.Second)
	tab.run("sign in",
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
	)
}

// TestUISignIn signs in with a wrong token (refused with a message), then
// with the right one (the job list, with a submitted job's row linking to
// its page), and signs out.
func TestUISignIn(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id, code := s.submit("echo hello from the list")
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	tab := openUI(t, s)
	tab.signIn("not-the-token")
	tab.wait("the refusal", `!!document.querySelector('#token-error')`, 20*time.Second)
	if msg := evalUI[string](tab, `document.querySelector('#token-error').textContent`); !strings.Contains(msg, "not valid") {
		t.Errorf("refusal message %q", msg)
	}
	tab.shot("wrong-token")

	tab.signIn(testToken)
	tab.wait("the job list", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q] a[href="/jobs/%s"]')`, id, id), 20*time.Second)
	tab.shot("jobs")
	if got := evalUI[string](tab, fmt.Sprintf(`document.querySelector('tr[data-job=%q] .task a').textContent`, id)); got != "echo hello from the list" {
		t.Errorf("the row's task: %q", got)
	}
	// The cookie is not readable by scripts.
	if c := evalUI[string](tab, `document.cookie`); strings.Contains(c, "agentbox_session") {
		t.Errorf("document.cookie shows the session: %q", c)
	}

	tab.run("sign out", chromedp.Click(chromedp.CSS(`form.signout button`)))
	tab.wait("the sign-in page again", `!!document.querySelector('input[type=password]')`, 20*time.Second)
}

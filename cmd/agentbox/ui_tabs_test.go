package main

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// filesJob writes a Go file, a text file and a hostile name into its
// workspace: what the Files and Diff tabs show.
const filesJob = `mkdir -p src && printf 'package main\n\nfunc main() {\n\tprintln("hello from the tabs")\n}\n' > src/main.go &&
echo 'notes <b>not bold</b>' > notes.txt && echo x > '<img src=x onerror=alert(1)>'`

// TestUITabs goes through the job page's tabs with per-job view origins:
// a running job's desktop, connected, in the Desktop tab's frame; an ended
// job's files (a file highlighted), its diff in both views, and its zip.
//
// The UI is opened at http://view.localhost:PORT and the views are on
// http://{job}.view.localhost:PORT: Chromium takes each *.localhost name
// for a site of its own, so with views on {job}.localhost the UI's frame
// would be cross-site, where the views' SameSite=Strict cookies are never
// sent; under view.localhost they are same-site, as a deployment's
// agentbox.example.com and {job}.view.example.com are.
func TestUITabs(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, port, _ := strings.Cut(strings.TrimPrefix(s.url, "http://"), ":")
	s.env = append(s.env, "AGENTBOX_VIEW_URL=http://{job}.view.localhost:"+port)
	s.start()
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs)
		}
	}()
	ui := *s
	ui.url = "http://view.localhost:" + port
	tab := openUI(t, &ui)
	// noVNC's own page logs errors of its own (a missing package.json):
	// the sandbox's, in the frame, not the UI's.
	t.Cleanup(func() {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		tab.problems = slices.DeleteFunc(tab.problems, func(p string) bool { return strings.Contains(p, ".view.localhost:"+port+"/v1/jobs/") })
	})

	desk, code := s.submit(desktopJob)
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	defer s.do("POST", "/v1/jobs/"+desk+"/cancel", nil, nil)
	files, _ := s.submit(filesJob)
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.querySelector('form.signout')`, 20*time.Second)
	waitUntil(t, time.Minute, func() bool { return s.job(desk).Status == "running" })

	// The desktop, in the tab's frame: most of the page is the desktop's colour.
	tab.run("open the desktop tab", chromedp.Navigate(ui.url+"/jobs/"+desk+"#desktop"))
	tab.wait("the frame", `!!document.querySelector('#desktop-panel iframe')`, 20*time.Second)
	var share float64
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		shot, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if share = colourShare(t, shot, 0xff, 0x00, 0xff); share > 0.25 {
			break
		}
		time.Sleep(500 * time.Millisecond) // noVNC connects, the job paints
	}
	tab.shot("desktop")
	if share <= 0.25 {
		t.Fatalf("the page is %.0f%% desktop colour, want > 25%%: noVNC did not connect in the frame", 100*share)
	}

	// The ended job: files, a highlighted file, the diff, the zip.
	waitUntil(t, 2*time.Minute, func() bool { return s.job(files).Status == "complete" })
	tab.run("open the job", chromedp.Navigate(ui.url+"/jobs/"+files))
	tab.wait("the tabs", `!!document.querySelector('#tab-files')`, 20*time.Second)
	tab.run("open the files tab", chromedp.Click(chromedp.CSS(`#tab-files`)))
	tab.wait("the tree", `!!document.querySelector('button.tree-dir[data-dir="src"]')`, 20*time.Second)
	if got := evalUI[string](tab, `location.hash`); got != "#files" {
		t.Errorf("hash %q, want #files", got)
	}
	if n := evalUI[int](tab, `document.querySelectorAll('#files-panel img').length`); n != 0 {
		t.Errorf("a file name became %d img elements", n)
	}
	tab.run("open src", chromedp.Click(chromedp.CSS(`button.tree-dir[data-dir="src"]`)))
	tab.wait("src/main.go", `!!document.querySelector('button.tree-file[data-file="src/main.go"]')`, 20*time.Second)
	tab.run("open main.go", chromedp.Click(chromedp.CSS(`button.tree-file[data-file="src/main.go"]`)))
	tab.wait("the highlighted file", `!!document.querySelector('.file-view pre.code .kn') && document.querySelector('.file-view pre.code').textContent.includes('hello from the tabs')`, 20*time.Second)
	tab.shot("files")

	// Keyboard: the arrow key moves to the Diff tab.
	tab.run("arrow to the diff tab", chromedp.Focus(chromedp.CSS(`#tab-files`)), chromedp.KeyEvent(kb.ArrowRight))
	tab.wait("the unified diff", `!!document.querySelector('.diff-table.unified') && document.querySelector('#diff-panel').textContent.includes('hello from the tabs')`, 20*time.Second)
	if got := evalUI[string](tab, `document.activeElement.id + " " + location.hash`); got != "tab-diff #diff" {
		t.Errorf("after ArrowRight: focus and hash %q", got)
	}
	tab.shot("diff-unified")
	tab.run("side by side", chromedp.Click(chromedp.CSS(`input[name="diff-view"][value="split"]`)))
	tab.wait("the split diff", `!!document.querySelector('.diff-table.split td.add') && document.querySelector('#diff-panel').textContent.includes('not bold')`, 20*time.Second)
	tab.shot("diff-split")

	// The zip link downloads the workspace.
	dir := t.TempDir()
	events := true
	if _, err := chromedp.CallBrowser(tab.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: &events}); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		for ev, err := range chromedp.BrowserEvents(tab.ctx, browser.DownloadProgress) {
			if err != nil {
				return
			}
			if ev.State == browser.DownloadProgressStateCompleted || ev.State == browser.DownloadProgressStateCanceled {
				done <- string(ev.State) + " " + ev.GUID
				return
			}
		}
	}()
	tab.run("open the files tab", chromedp.Click(chromedp.CSS(`#tab-files`)))
	tab.run("download the zip", chromedp.Click(chromedp.CSS(`#files-panel a[href$="/artifacts.zip"]`)))
	select {
	case got := <-done:
		state, guid, _ := strings.Cut(got, " ")
		b, err := os.ReadFile(dir + "/" + guid)
		if state != "completed" || err != nil || !strings.HasPrefix(string(b), "PK") || !strings.Contains(string(b), "src/main.go") {
			t.Fatalf("download %s: %d bytes, %v", state, len(b), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the zip did not download")
	}

}

package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// jupyterCOOP makes the job's Jupyter answer with
// Cross-Origin-Opener-Policy: same-origin, as a sandbox can: the agent
// writes the notebook server's configuration before the server starts.
const jupyterCOOP = `mkdir -p ~/.jupyter && for app in NotebookApp ServerApp; do
echo "c.$app.tornado_settings = {'headers': {'Cross-Origin-Opener-Policy': 'same-origin'}}"; done > ~/.jupyter/jupyter_notebook_config.py &&
cp ~/.jupyter/jupyter_notebook_config.py ~/.jupyter/jupyter_server_config.py && echo configured && sleep 300`

// TestUISandboxPageCannotReachSession: a signed-in browser opens a job's
// Jupyter on the API's origin (no AGENTBOX_VIEW_URL), whose pages the agent
// controls, down to their headers. Their script must not get the session:
// a UI page it opens in a window must not be scriptable from it (it asks
// for Cross-Origin-Opener-Policy: same-origin, as the UI's pages do, so
// that they would share a browsing context group), and another job's
// images must not load for it after it changed its URL to that job's page
// (history.replaceState, which the Referer follows). Nor may it read
// another job's file listing, which the files route answers to the UI's
// download links (navigations without the CSRF header).
func TestUISandboxPageCannotReachSession(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.getElementById("jobs")`, 20*time.Second)
	a, _ := s.submit(jupyterCOOP)
	b, _ := s.submit("sleep 300")
	defer s.do("POST", "/v1/jobs/"+a+"/cancel", nil, nil)
	defer s.do("POST", "/v1/jobs/"+b+"/cancel", nil, nil)
	waitUntil(t, 2*time.Minute, func() bool {
		return s.job(b).Status == "running" && strings.Contains(string(s.get(t, "/v1/jobs/"+a+"/events", http.StatusOK)), "configured")
	})

	// The Jupyter page opens in a tab of its own (the same browser, the
	// same cookies): its console is the sandbox's, not the UI's.
	jctx, cancel := chromedp.NewContext(tab.ctx)
	defer cancel()
	if err := chromedp.Do(jctx, chromedp.Navigate(absolute(s.url, s.viewerLinks(a).JupyterURL))); err != nil {
		t.Fatal(err)
	}
	if err := pollPage(jctx, `!!document.querySelector("#notebook_list, #ipython-main-app")`, 90*time.Second); err != nil {
		t.Fatalf("jupyter UI did not load: %v", err)
	}
	mediaBefore := s.mediaStatuses()
	probe := fmt.Sprintf(`(async () => {
		const out = {popup: "none"};
		const w = window.open("/jobs/%[1]s", "_blank");
		for (let i = 0; w && i < 200; i++) {
			await new Promise(r => setTimeout(r, 50));
			if (w.closed) { out.popup = "cut off"; break; }
			let m = null;
			try { m = w.document.querySelector('meta[name="csrf-token"]'); } catch (e) { out.popup = "blocked"; break; }
			if (m) {
				out.popup = "read";
				const r = await fetch("/v1/jobs/%[1]s/cancel", {method: "POST", headers: {"X-CSRF-Token": m.content}});
				out.cancel = String(r.status);
				break;
			}
		}
		// The files route answers the UI's download links, navigations
		// without the CSRF header; a listing is shown, not saved.
		out.listing = "none";
		const l = window.open("/v1/jobs/%[1]s/files/?list", "_blank");
		for (let i = 0; l && i < 200; i++) {
			await new Promise(r => setTimeout(r, 50));
			if (l.closed) { out.listing = "cut off"; break; }
			let text = "";
			try { text = l.document.body ? l.document.body.textContent : ""; } catch (e) { out.listing = "blocked"; break; }
			if (text.includes("entries")) { out.listing = "read"; break; }
		}
		history.replaceState(null, "", "/jobs/%[1]s");
		await new Promise(done => { const img = new Image(); img.onload = img.onerror = done; img.src = "/v1/jobs/%[1]s/media/1-1.png"; });
		return out;
	})()`, b)
	got, err := chromedp.Run(jctx, chromedp.Evaluate[map[string]string](probe, chromedp.EvalAwaitPromise,
		func(p *runtime.EvaluateParams) { yes := true; p.UserGesture = &yes }))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the sandbox page's probe: %v", got)
	if got["popup"] == "read" || got["popup"] == "none" {
		t.Errorf("the sandbox's page opened job %s's UI page and read it (%v); want it cut off", b, got)
	}
	if got["listing"] == "read" || got["listing"] == "none" {
		t.Errorf("the sandbox's page opened job %s's file listing and read it (%v); want it cut off", b, got)
	}
	if st := s.job(b).Status; st != "running" {
		t.Errorf("job %s is %s after the sandbox page's probe, want running", b, st)
	}
	mediaAfter := s.mediaStatuses()
	if mediaAfter["401"] != mediaBefore["401"]+1 {
		t.Errorf("another job's image requested by the sandbox's page: statuses before %v, after %v; want one more 401", mediaBefore, mediaAfter)
	}
}

// mediaStatuses counts the answers of the media route by status, from the
// server's metrics.
func (s *server) mediaStatuses() map[string]int {
	s.t.Helper()
	n := map[string]int{}
	for _, line := range strings.Split(string(s.get(s.t, "/metrics", http.StatusOK)), "\n") {
		if strings.HasPrefix(line, "agentbox_http_requests_total{") && strings.Contains(line, "/media/{name}") {
			_, rest, _ := strings.Cut(line, `code="`)
			code, _, _ := strings.Cut(rest, `"`)
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			n[code] += int(v)
		}
	}
	return n
}

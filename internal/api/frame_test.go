package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestViewsFramedByTheUI: with per-job view origins, the views may be
// framed by the web UI's origin only, and a ticket redeemed in a frame
// gives the frame pass that lets the frame's redirects through; a frame
// without it (another job's page framing the view) is still refused.
func TestViewsFramedByTheUI(t *testing.T) {
	e := newProxyEnv(t, api.Config{ViewURL: "https://{job}.view.test"})
	a := e.running()
	host := strings.ReplaceAll(a, "_", "-") + ".view.test"
	frame := map[string]string{"Host": host, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}
	with := func(cookies []*http.Cookie) map[string]string {
		h := map[string]string{}
		for k, v := range frame {
			h[k] = v
		}
		var cs []string
		for _, c := range cookies {
			cs = append(cs, c.Name+"="+c.Value)
		}
		h["Cookie"] = strings.Join(cs, "; ")
		return h
	}
	ticket := strings.SplitN(e.links(t, a).DesktopURL, "ticket=", 2)[1]
	resp, body := e.get(t, "/v1/jobs/"+a+"/desktop/?ticket="+ticket, frame)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 2 {
		t.Fatalf("ticket in a frame: %d, %d cookies: %s", resp.StatusCode, len(resp.Cookies()), body)
	}
	var viewer []*http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == api.ViewerCookie {
			viewer = append(viewer, c)
		}
		if c.Name == api.FrameCookie && (c.MaxAge > 60 || c.SameSite != http.SameSiteStrictMode || !c.HttpOnly) {
			t.Errorf("frame pass %+v", c)
		}
	}
	resp, body = e.get(t, "/v1/jobs/"+a+"/desktop/vnc.html", with(resp.Cookies()))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the frame's redirect with the frame pass: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); csp != "frame-ancestors 'self' https://view.test" {
		t.Errorf("CSP %q, want the UI's origin as the only other ancestor", csp)
	}
	if resp, _ := e.get(t, "/v1/jobs/"+a+"/desktop/vnc.html", with(viewer)); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a frame with the viewer cookie alone: %d, want 403", resp.StatusCode)
	}
	// A ticket redeemed by a top-level navigation gives no frame pass.
	ticket = strings.SplitN(e.links(t, a).DesktopURL, "ticket=", 2)[1]
	resp, _ = e.get(t, "/v1/jobs/"+a+"/desktop/?ticket="+ticket, map[string]string{"Host": host, "Sec-Fetch-Dest": "document"})
	if len(resp.Cookies()) != 1 || resp.Cookies()[0].Name != api.ViewerCookie {
		t.Errorf("top-level ticket: cookies %v", resp.Cookies())
	}
}

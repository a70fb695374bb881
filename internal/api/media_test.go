package api_test

import (
	"bytes"
	"html"
	"image"
	"image/png"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// tinyPNG is a real 2x2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestMedia: a kept image is served as what it is, with headers that keep
// it pixels only; names other than the ones kept are refused; the image
// goes with the job's data.
func TestMedia(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("shoot").ID
	pic := tinyPNG(t)
	name, err := e.Media.Save(id, 3, pic)
	if err != nil || name != "3-1.png" {
		t.Fatalf("Save = %q, %v; want 3-1.png", name, err)
	}
	if name, err := e.Media.Save(id, 3, []byte("<script>alert(1)</script>")); name != "" || err != nil {
		t.Fatalf("Save of a non-image = %q, %v; want skipped", name, err)
	}

	resp, body := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/media/3-1.png"})
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, pic) {
		t.Fatalf("GET media: %d, %d bytes; want 200 and the PNG", resp.StatusCode, len(body))
	}
	for h, want := range map[string]string{"Content-Type": "image/png", "X-Content-Type-Options": "nosniff",
		"Content-Security-Policy": "sandbox; default-src 'none'", "Cross-Origin-Resource-Policy": "same-origin"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}

	for _, c := range []struct {
		name   string
		status int
		code   string
	}{
		{"4-1.png", http.StatusNotFound, wire.CodeNotFound},
		{"3-1.gif", http.StatusBadRequest, wire.CodeBadRequest},
		{"3-1.png.html", http.StatusBadRequest, wire.CodeBadRequest},
		{".tmp-123", http.StatusBadRequest, wire.CodeBadRequest},
		{"a-1.png", http.StatusBadRequest, wire.CodeBadRequest},
		{"..%2f..%2fagentbox.db", http.StatusBadRequest, wire.CodeBadRequest},
	} {
		resp, body := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/media/" + c.name})
		wantError(t, resp, body, c.status, c.code)
	}
	resp, body = do(t, e, req{method: "GET", path: "/v1/jobs/job_nope/media/3-1.png"})
	wantError(t, resp, body, http.StatusNotFound, wire.CodeNotFound)
	resp, body = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/media/3-1.png", noAuth: true})
	wantError(t, resp, body, http.StatusUnauthorized, wire.CodeUnauthorized)

	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	if resp, body := do(t, e, req{method: "DELETE", path: "/v1/jobs/" + id}); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/media/3-1.png"})
	wantError(t, resp, body, http.StatusGone, wire.CodeDeleted)
	if f, _, err := e.Media.Open(id, "3-1.png"); err == nil {
		f.Close()
		t.Errorf("the image outlived the job's data")
	}
}

// TestMediaSession: the UI's job page may load its job's images with
// <img> and the session alone, at the URLs the page gives them; nothing
// else the cookie comes with may.
func TestMediaSession(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("shoot").ID
	name, err := e.Media.Save(id, 1, tinyPNG(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Emit(id, event.ToolResult{Step: 1, Name: "computer", Media: []string{name}})
	_, cookie := signIn(t, e, apitest.Token)
	_, page := do(t, e, req{method: "GET", path: "/jobs/" + id, noAuth: true, header: with(navigation, "Cookie", cookie)})
	src := regexp.MustCompile(`<img class="ev-media" src="([^"]+)"`).FindSubmatch(page)
	plain := "/v1/jobs/" + id + "/media/" + name
	if src == nil || !strings.HasPrefix(html.UnescapeString(string(src[1])), plain+"?k=") {
		t.Fatalf("the job page shows no keyed image:\n%s", page)
	}
	keyed := html.UnescapeString(string(src[1]))
	img := map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors",
		"Sec-Fetch-Dest": "image", "Referer": e.URL + "/jobs/" + id}
	for _, c := range []struct {
		what   string
		path   string
		header map[string]string
		status int
	}{
		{"the job page's <img>", keyed, img, http.StatusOK},
		// A page of the API's origin (a sandbox's, without
		// AGENTBOX_VIEW_URL) can give itself the job page's URL with
		// history.replaceState, and the Referer follows; it lacks the key.
		{"a page that took the job page's URL", plain, img, http.StatusUnauthorized},
		{"a wrong key", plain + "?k=" + strings.Repeat("A", 22), img, http.StatusUnauthorized},
		{"no cookie", keyed, with(img, "Cookie", ""), http.StatusUnauthorized},
		{"a script's fetch", keyed, with(img, "Sec-Fetch-Dest", "empty", "Sec-Fetch-Mode", "cors"), http.StatusUnauthorized},
		{"a page of the job's desktop", keyed, with(img, "Referer", e.URL+"/v1/jobs/"+id+"/desktop/vnc.html"), http.StatusUnauthorized},
		{"another job's page", keyed, with(img, "Referer", e.URL+"/jobs/job_other"), http.StatusUnauthorized},
		{"no Referer", keyed, with(img, "Referer", ""), http.StatusUnauthorized},
		{"another site", keyed, with(img, "Sec-Fetch-Site", "cross-site"), http.StatusUnauthorized},
		{"a same-site origin", keyed, with(img, "Sec-Fetch-Site", "same-site"), http.StatusUnauthorized},
		{"a navigation", keyed, with(navigation, "Cookie", cookie, "Referer", e.URL+"/jobs/"+id), http.StatusUnauthorized},
	} {
		resp, body := do(t, e, req{method: "GET", path: c.path, noAuth: true, header: c.header})
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.what, resp.StatusCode, c.status, body)
		}
	}
}

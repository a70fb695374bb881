package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/forge"
)

// standIn is a local HTTP server standing in for GitHub's REST API or the
// Gitea (Forgejo) API. It is the only stand-in in these tests, because
// opening a real pull request needs an account on a real service, the
// network and a token, none of which a test run may have. To keep the
// client honest it checks every request against the documented shape and
// answers in the documented one:
//
//   - GitHub, https://docs.github.com/rest/pulls/pulls (API version
//     2022-11-28): "Create a pull request" is POST /repos/{owner}/{repo}/pulls
//     with Accept: application/vnd.github+json, X-GitHub-Api-Version,
//     Authorization: Bearer TOKEN and a User-Agent; the JSON body has
//     title, head, base, body (strings) and draft (boolean); 201 returns
//     the pull request (html_url, number, head.ref, base.ref); errors are
//     {message, errors[], documentation_url}. "List pull requests" filters
//     by state and head=owner:branch.
//   - Gitea, repoCreatePullRequest in its swagger: the same path under
//     /api/v1 with Authorization: token TOKEN and a CreatePullRequestOption
//     of title, head, base, body; 409 when one exists; errors are
//     {message, url}. repoListPullRequests pages with page and limit.
type standIn struct {
	t     *testing.T
	kind  forge.Kind
	token string
	srv   *httptest.Server
	// reply answers a well-formed create; nil means 201 and a new pull
	// request numbered 1.
	reply func(body map[string]any) (int, any)
	// open is what listing the open pull requests returns.
	open []map[string]any

	mu      sync.Mutex
	creates []map[string]any // bodies of well-formed creates
	paths   []string         // paths of well-formed creates
	lists   []url.Values     // queries of lists
}

func newStandIn(t *testing.T, kind forge.Kind, token string) *standIn {
	s := &standIn{t: t, kind: kind, token: token}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+s.prefix()+"/repos/{owner}/{repo}/pulls", s.create)
	mux.HandleFunc("GET "+s.prefix()+"/repos/{owner}/{repo}/pulls", s.list)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("stand-in: unexpected %s %s", r.Method, r.URL)
		s.fail(w, http.StatusNotFound, "Not Found")
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *standIn) prefix() string {
	if s.kind == forge.KindGitea {
		return "/api/v1"
	}
	return "/api/v3"
}

// host is the configured service the stand-in is, serving git.example.com.
func (s *standIn) host() forge.Host {
	return forge.Host{Kind: s.kind, Host: "git.example.com", APIBase: s.srv.URL + s.prefix(), Token: s.token}
}

func (s *standIn) create(w http.ResponseWriter, r *http.Request) {
	if !s.checkHeaders(w, r) {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("stand-in: Content-Type %q, want application/json", ct)
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.t.Errorf("stand-in: body is not a JSON object: %v", err)
		s.fail(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if !s.checkBody(w, body) {
		return
	}
	s.mu.Lock()
	s.creates = append(s.creates, body)
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	status, out := http.StatusCreated, any(nil)
	if s.reply != nil {
		status, out = s.reply(body)
	} else {
		out = s.pull(1, r.PathValue("owner"), body["head"].(string), body["base"].(string))
	}
	writeJSON(w, status, out)
}

// checkHeaders checks the headers each API documents.
func (s *standIn) checkHeaders(w http.ResponseWriter, r *http.Request) bool {
	want := map[string]string{"Authorization": "token " + s.token}
	if s.kind == forge.KindGitHub {
		want = map[string]string{
			"Accept":               "application/vnd.github+json",
			"X-GitHub-Api-Version": "2022-11-28",
			"Authorization":        "Bearer " + s.token,
		}
	}
	ok := r.Header.Get("User-Agent") != ""
	if !ok {
		s.t.Errorf("stand-in: no User-Agent")
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			s.t.Errorf("stand-in: header %s = %q, want %q", k, got, v)
			ok = false
		}
	}
	if !ok {
		s.fail(w, http.StatusUnauthorized, "Bad credentials")
	}
	return ok
}

// checkBody checks that the create's body has exactly the documented
// fields, of the documented types.
func (s *standIn) checkBody(w http.ResponseWriter, body map[string]any) bool {
	want := map[string]string{"title": "string", "head": "string", "base": "string", "body": "string"}
	if s.kind == forge.KindGitHub {
		want["draft"] = "bool"
	}
	got := map[string]string{}
	for k, v := range body {
		got[k] = reflect.TypeOf(v).String()
	}
	if !reflect.DeepEqual(got, want) {
		s.t.Errorf("stand-in: body fields %v, want %v", got, want)
		s.fail(w, http.StatusUnprocessableEntity, "Validation Failed")
		return false
	}
	return true
}

func (s *standIn) list(w http.ResponseWriter, r *http.Request) {
	if !s.checkHeaders(w, r) {
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	s.lists = append(s.lists, q)
	s.mu.Unlock()
	if q.Get("state") != "open" {
		s.t.Errorf("stand-in: list state %q, want open", q.Get("state"))
	}
	if s.kind == forge.KindGitea {
		writeJSON(w, http.StatusOK, s.page(q))
		return
	}
	var out []map[string]any
	for _, p := range s.open {
		if label(p, "head") == q.Get("head") && (q.Get("base") == "" || ref(p, "base") == q.Get("base")) {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// page is one page of Gitea's list (page from 1, limit at most 50).
func (s *standIn) page(q url.Values) []map[string]any {
	page, err1 := strconv.Atoi(q.Get("page"))
	limit, err2 := strconv.Atoi(q.Get("limit"))
	if err1 != nil || err2 != nil || page < 1 || limit < 1 || limit > 50 {
		s.t.Errorf("stand-in: list page %q limit %q", q.Get("page"), q.Get("limit"))
		return nil
	}
	from := min((page-1)*limit, len(s.open))
	return append([]map[string]any{}, s.open[from:min(from+limit, len(s.open))]...)
}

// pull is a pull request as the API returns it (the fields Open reads and
// a few more).
func (s *standIn) pull(number int, owner, head, base string) map[string]any {
	web := fmt.Sprintf("https://git.example.com/%s/widgets/pull/%d", owner, number)
	if s.kind == forge.KindGitea {
		web = fmt.Sprintf("https://git.example.com/%s/widgets/pulls/%d", owner, number)
	}
	return map[string]any{
		"id": 1000 + number, "number": number, "state": "open", "title": "t",
		"url": s.srv.URL + s.prefix() + "/repos/" + owner + "/widgets/pulls/" + strconv.Itoa(number), "html_url": web,
		"head": map[string]any{"label": owner + ":" + head, "ref": head, "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
		"base": map[string]any{"label": owner + ":" + base, "ref": base, "sha": "fc5f8f5b07c31b0c6e6ed6b0b1b7f0c7e9a3c6d1"},
	}
}

// fail answers in the API's error shape.
func (s *standIn) fail(w http.ResponseWriter, status int, msg string) {
	body := map[string]any{"message": msg, "url": "https://git.example.com/api/swagger"}
	if s.kind == forge.KindGitHub {
		body = map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
	}
	writeJSON(w, status, body)
}

func (s *standIn) recorded() ([]map[string]any, []url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any{}, s.creates...), append([]url.Values{}, s.lists...)
}

func (s *standIn) createPaths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.paths...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func label(p map[string]any, side string) string {
	return p[side].(map[string]any)["label"].(string)
}

func ref(p map[string]any, side string) string {
	return p[side].(map[string]any)["ref"].(string)
}

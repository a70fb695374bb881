// Package forgetest runs a local HTTP server standing in for GitHub's REST
// API or the Gitea (Forgejo) API, for tests of pull requests. It is the
// only stand-in in agentbox's tests besides the scripted model, because
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
//     {message, errors[], documentation_url}; a second pull request from
//     the same head into the same base is 422 "A pull request already
//     exists". "List pull requests" filters by state and head=owner:branch.
//   - Gitea, repoCreatePullRequest in its swagger: the same path under
//     /api/v1 with Authorization: token TOKEN and a CreatePullRequestOption
//     of title, head, base, body; 409 when one exists; errors are
//     {message, url}. repoListPullRequests pages with page and limit.
//
// A request that is not of the documented shape fails the test.
package forgetest

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

// StandIn is a running stand-in for one service's API.
type StandIn struct {
	t     testing.TB
	kind  forge.Kind
	token string
	srv   *httptest.Server
	// Reply, if set, answers every well-formed create. Nil: the stand-in
	// behaves as the service does: 201 and a new pull request (kept among
	// the open ones), or the documented "already exists" error when an
	// open one goes from the same head into the same base.
	Reply func(body map[string]any) (int, any)
	// Open are the open pull requests, which lists return.
	Open []map[string]any

	mu      sync.Mutex
	creates []map[string]any // bodies of well-formed creates
	paths   []string         // paths of well-formed creates
	lists   []url.Values     // queries of lists
}

// New starts a stand-in for a service of kind that accepts token alone,
// until the test ends.
func New(t testing.TB, kind forge.Kind, token string) *StandIn {
	s := &StandIn{t: t, kind: kind, token: token}
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

func (s *StandIn) prefix() string {
	if s.kind == forge.KindGitea {
		return "/api/v1"
	}
	return "/api/v3"
}

// APIBase is the root of the stand-in's API, as AGENTBOX_GIT_HOSTS names it.
func (s *StandIn) APIBase() string { return s.srv.URL + s.prefix() }

// Host is the stand-in as the service of git remotes on gitHost
// (host[:port]), with its token.
func (s *StandIn) Host(gitHost string) forge.Host {
	return forge.Host{Kind: s.kind, Host: gitHost, APIBase: s.APIBase(), Token: s.token}
}

func (s *StandIn) create(w http.ResponseWriter, r *http.Request) {
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
	reply := s.Reply
	s.mu.Unlock()
	if reply != nil {
		status, out := reply(body)
		writeJSON(w, status, out)
		return
	}
	s.opened(w, r.PathValue("owner"), r.PathValue("repo"), body["head"].(string), body["base"].(string))
}

// opened answers a create as the service does: a new pull request, or
// "already exists".
func (s *StandIn) opened(w http.ResponseWriter, owner, repo, head, base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.Open {
		if Ref(p, "head") == head && Ref(p, "base") == base {
			s.exists(w, owner, head)
			return
		}
	}
	p := s.pull(len(s.Open)+1, owner, repo, head, base)
	s.Open = append(s.Open, p)
	writeJSON(w, http.StatusCreated, p)
}

// exists is the service's answer to a second pull request for the same
// branches.
func (s *StandIn) exists(w http.ResponseWriter, owner, head string) {
	if s.kind == forge.KindGitea {
		writeJSON(w, http.StatusConflict, map[string]any{"message": "pull request already exists for these targets", "url": "https://git.example.com/api/swagger"})
		return
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + owner + ":" + head + "."}},
		"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
		"status":            "422",
	})
}

// checkHeaders checks the headers each API documents.
func (s *StandIn) checkHeaders(w http.ResponseWriter, r *http.Request) bool {
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
func (s *StandIn) checkBody(w http.ResponseWriter, body map[string]any) bool {
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

func (s *StandIn) list(w http.ResponseWriter, r *http.Request) {
	if !s.checkHeaders(w, r) {
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, q)
	if q.Get("state") != "open" {
		s.t.Errorf("stand-in: list state %q, want open", q.Get("state"))
	}
	if s.kind == forge.KindGitea {
		writeJSON(w, http.StatusOK, s.page(q))
		return
	}
	out := []map[string]any{}
	for _, p := range s.Open {
		if label(p, "head") == q.Get("head") && (q.Get("base") == "" || Ref(p, "base") == q.Get("base")) {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// page is one page of Gitea's list (page from 1, limit at most 50).
func (s *StandIn) page(q url.Values) []map[string]any {
	page, err1 := strconv.Atoi(q.Get("page"))
	limit, err2 := strconv.Atoi(q.Get("limit"))
	if err1 != nil || err2 != nil || page < 1 || limit < 1 || limit > 50 {
		s.t.Errorf("stand-in: list page %q limit %q", q.Get("page"), q.Get("limit"))
		return nil
	}
	from := min((page-1)*limit, len(s.Open))
	return append([]map[string]any{}, s.Open[from:min(from+limit, len(s.Open))]...)
}

// Pull is a pull request of repository owner/widgets as the API returns
// it (the fields Open reads and a few more).
func (s *StandIn) Pull(number int, owner, head, base string) map[string]any {
	return s.pull(number, owner, "widgets", head, base)
}

func (s *StandIn) pull(number int, owner, repo, head, base string) map[string]any {
	web := fmt.Sprintf("https://git.example.com/%s/%s/pull/%d", owner, repo, number)
	if s.kind == forge.KindGitea {
		web = fmt.Sprintf("https://git.example.com/%s/%s/pulls/%d", owner, repo, number)
	}
	return map[string]any{
		"id": 1000 + number, "number": number, "state": "open", "title": "t",
		"url": s.APIBase() + "/repos/" + owner + "/" + repo + "/pulls/" + strconv.Itoa(number), "html_url": web,
		"head": map[string]any{"label": owner + ":" + head, "ref": head, "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
		"base": map[string]any{"label": owner + ":" + base, "ref": base, "sha": "fc5f8f5b07c31b0c6e6ed6b0b1b7f0c7e9a3c6d1"},
	}
}

// fail answers in the API's error shape.
func (s *StandIn) fail(w http.ResponseWriter, status int, msg string) {
	body := map[string]any{"message": msg, "url": "https://git.example.com/api/swagger"}
	if s.kind == forge.KindGitHub {
		body = map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
	}
	writeJSON(w, status, body)
}

// Recorded returns the bodies of the well-formed creates and the queries
// of the lists, in the order they came.
func (s *StandIn) Recorded() ([]map[string]any, []url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any{}, s.creates...), append([]url.Values{}, s.lists...)
}

// OpenPulls returns the open pull requests.
func (s *StandIn) OpenPulls() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any{}, s.Open...)
}

// CreatePaths returns the paths of the well-formed creates.
func (s *StandIn) CreatePaths() []string {
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

// Ref is the branch of a pull request's side ("head" or "base").
func Ref(p map[string]any, side string) string {
	return p[side].(map[string]any)["ref"].(string)
}

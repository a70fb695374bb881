package forge_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/forge/forgetest"
)

const (
	testToken  = "ghp_s3cretT0kenThatMustNeverLeak"
	testRemote = "https://git.example.com/acme/widgets.git"
	testBranch = "agentbox/job_01"
)

// openCase is one call of Open against a stand-in.
type openCase struct {
	name  string
	pr    func(*forge.PullRequest) // changes the default pull request
	reply func(map[string]any) (int, any)
	open  func(*forgetest.StandIn) []map[string]any
	want  forge.Opened
	// wantBody are fields the create's body must hold.
	wantBody map[string]any
	// wantErr are texts the error must hold; wantIs an error it must wrap.
	wantErr []string
	wantIs  error
	// wantLists is how many list requests are made.
	wantLists int
}

func basePR() forge.PullRequest {
	return forge.PullRequest{Head: testBranch, Base: "main", Title: "Fix the empty case", Body: "Done by agentbox."}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runOpen runs each case against a fresh stand-in of kind.
func runOpen(t *testing.T, kind forge.Kind, cases []openCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := forgetest.New(t, kind, testToken)
			s.Reply = tc.reply
			if tc.open != nil {
				s.Open = tc.open(s)
			}
			pr := basePR()
			if tc.pr != nil {
				tc.pr(&pr)
			}
			got, err := forge.New([]forge.Host{s.Host("git.example.com")}, nil).Open(ctxTimeout(t), testRemote, pr)
			creates, lists := s.Recorded()
			checkOpen(t, tc, got, err)
			if len(creates) != 1 || len(lists) != tc.wantLists {
				t.Fatalf("%d creates, %d lists; want 1, %d", len(creates), len(lists), tc.wantLists)
			}
			for k, v := range tc.wantBody {
				if creates[0][k] != v {
					t.Errorf("body %s = %#v, want %#v", k, creates[0][k], v)
				}
			}
		})
	}
}

func checkOpen(t *testing.T, tc openCase, got forge.Opened, err error) {
	t.Helper()
	if tc.wantErr == nil && tc.wantIs == nil {
		if err != nil || got != tc.want {
			t.Fatalf("Open = %+v, %v; want %+v", got, err, tc.want)
		}
		return
	}
	if err == nil {
		t.Fatalf("Open = %+v, want an error", got)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error holds the token: %v", err)
	}
	for _, s := range tc.wantErr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
		t.Errorf("error %v is not %v", err, tc.wantIs)
	}
}

// reply answers every create with status and body.
func reply(status int, body any) func(map[string]any) (int, any) {
	return func(map[string]any) (int, any) { return status, body }
}

// TestOpenGitHub opens pull requests against the GitHub stand-in: the
// request's shape is checked there, the outcome here.
func TestOpenGitHub(t *testing.T) {
	exists := map[string]any{
		"message":           "Validation Failed",
		"errors":            []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:" + testBranch + "."}},
		"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
		"status":            "422",
	}
	runOpen(t, forge.KindGitHub, []openCase{{
		name:     "opens",
		want:     forge.Opened{URL: "https://git.example.com/acme/widgets/pull/1", Number: 1},
		wantBody: map[string]any{"title": "Fix the empty case", "head": testBranch, "base": "main", "body": "Done by agentbox.", "draft": false},
	}, {
		name:     "draft",
		pr:       func(pr *forge.PullRequest) { pr.Draft = true },
		want:     forge.Opened{URL: "https://git.example.com/acme/widgets/pull/1", Number: 1},
		wantBody: map[string]any{"title": "Fix the empty case", "draft": true},
	}, {
		name:  "already exists returns the open one",
		reply: reply(http.StatusUnprocessableEntity, exists),
		open: func(s *forgetest.StandIn) []map[string]any {
			return []map[string]any{s.Pull(41, "acme", "other", "main"), s.Pull(42, "acme", testBranch, "main")}
		},
		want:      forge.Opened{URL: "https://git.example.com/acme/widgets/pull/42", Number: 42},
		wantLists: 1,
	}, {
		name:  "already exists from a fork",
		pr:    func(pr *forge.PullRequest) { pr.Head = "fork:" + testBranch },
		reply: reply(http.StatusUnprocessableEntity, exists),
		open: func(s *forgetest.StandIn) []map[string]any {
			return []map[string]any{s.Pull(42, "acme", testBranch, "main"), s.Pull(43, "fork", testBranch, "main")}
		},
		want:      forge.Opened{URL: "https://git.example.com/fork/widgets/pull/43", Number: 43},
		wantBody:  map[string]any{"head": "fork:" + testBranch},
		wantLists: 1,
	}, {
		name:      "already exists but none open",
		reply:     reply(http.StatusUnprocessableEntity, exists),
		wantErr:   []string{"422", "A pull request already exists for acme:" + testBranch},
		wantIs:    forge.ErrAlreadyExists,
		wantLists: 1,
	}, {
		name:    "bad credentials",
		reply:   reply(http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"}),
		wantErr: []string{"HTTP 401", "Bad credentials", "https://docs.github.com/rest", "git.example.com"},
	}, {
		name:    "not found",
		reply:   reply(http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"}),
		wantErr: []string{"HTTP 404", "Not Found"},
	}, {
		name: "validation failed",
		reply: reply(http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed", "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
			"errors": []any{map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"}},
		}),
		wantErr: []string{"HTTP 422", "Validation Failed", "PullRequest base invalid"},
	}, {
		name:    "a service echoing the token",
		reply:   reply(http.StatusForbidden, map[string]any{"message": "token " + testToken + " lacks the repo scope"}),
		wantErr: []string{"HTTP 403", "lacks the repo scope"},
	}, {
		name:    "not JSON",
		reply:   reply(http.StatusBadGateway, "upstream down"),
		wantErr: []string{"HTTP 502", "upstream down"},
	}, {
		name:    "no html_url",
		reply:   reply(http.StatusCreated, map[string]any{"number": 3}),
		wantErr: []string{"no web URL"},
	}})
}

// TestOpenGitea opens pull requests against the Gitea stand-in.
func TestOpenGitea(t *testing.T) {
	exists := map[string]any{
		"message": "pull request already exists for these targets [id: 9, issue_id: 42, head_repo_id: 1, base_repo_id: 1, head_branch: " + testBranch + ", base_branch: main]",
		"url":     "https://git.example.com/api/swagger",
	}
	runOpen(t, forge.KindGitea, []openCase{{
		name:     "opens",
		want:     forge.Opened{URL: "https://git.example.com/acme/widgets/pulls/1", Number: 1},
		wantBody: map[string]any{"title": "Fix the empty case", "head": testBranch, "base": "main", "body": "Done by agentbox."},
	}, {
		name:     "draft is a WIP prefix",
		pr:       func(pr *forge.PullRequest) { pr.Draft = true },
		want:     forge.Opened{URL: "https://git.example.com/acme/widgets/pulls/1", Number: 1},
		wantBody: map[string]any{"title": "WIP: Fix the empty case"},
	}, {
		name:     "draft already marked",
		pr:       func(pr *forge.PullRequest) { pr.Draft, pr.Title = true, "[WIP] Fix" },
		want:     forge.Opened{URL: "https://git.example.com/acme/widgets/pulls/1", Number: 1},
		wantBody: map[string]any{"title": "[WIP] Fix"},
	}, {
		name:  "already exists returns the open one from a later page",
		reply: reply(http.StatusConflict, exists),
		open: func(s *forgetest.StandIn) []map[string]any {
			var open []map[string]any
			for i := range 25 {
				open = append(open, s.Pull(100+i, "acme", "feature", "main"))
			}
			return append(open, s.Pull(41, "acme", testBranch, "release"), s.Pull(42, "acme", testBranch, "main"))
		},
		want:      forge.Opened{URL: "https://git.example.com/acme/widgets/pulls/42", Number: 42},
		wantLists: 2,
	}, {
		name:  "already exists but none open",
		reply: reply(http.StatusConflict, exists),
		open: func(s *forgetest.StandIn) []map[string]any {
			return []map[string]any{s.Pull(7, "acme", "feature", "main")}
		},
		wantErr:   []string{"HTTP 409", "pull request already exists"},
		wantIs:    forge.ErrAlreadyExists,
		wantLists: 2,
	}, {
		name:    "unauthorized",
		reply:   reply(http.StatusUnauthorized, map[string]any{"message": "user does not exist [uid: 0, name: ]", "url": "https://git.example.com/api/swagger"}),
		wantErr: []string{"HTTP 401", "user does not exist"},
	}, {
		name:    "not found",
		reply:   reply(http.StatusNotFound, map[string]any{"errors": []any{"repository does not exist"}, "message": "The target couldn't be found.", "url": "https://git.example.com/api/swagger"}),
		wantErr: []string{"HTTP 404", "The target couldn't be found.", "repository does not exist"},
	}, {
		name:    "no changes",
		reply:   reply(http.StatusUnprocessableEntity, map[string]any{"message": "Invalid PullRequest: There are no changes between the head and the base", "url": "https://git.example.com/api/swagger"}),
		wantErr: []string{"HTTP 422", "no changes between the head and the base"},
	}, {
		name:    "a service echoing the token",
		reply:   reply(http.StatusForbidden, map[string]any{"message": "token " + testToken + " is not allowed"}),
		wantErr: []string{"HTTP 403", "is not allowed"},
	}})
}

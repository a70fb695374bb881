package forge_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/forge/forgetest"
)

// TestOpenRemotes reaches the service and the repository from each form of
// remote URL, or from the pull request's own Owner and Repo.
func TestOpenRemotes(t *testing.T) {
	cases := []struct {
		name, remote, owner, repo string
		wantPath                  string
	}{
		{"https", "https://git.example.com/acme/widgets", "", "", "/repos/acme/widgets/pulls"},
		{"https .git", "https://git.example.com/acme/widgets.git", "", "", "/repos/acme/widgets/pulls"},
		{"https with user", "https://bot@git.example.com/acme/widgets.git", "", "", "/repos/acme/widgets/pulls"},
		{"ssh with port", "ssh://git@git.example.com:2222/acme/widgets.git", "", "", "/repos/acme/widgets/pulls"},
		{"scp-like", "git@git.example.com:acme/widgets.git", "", "", "/repos/acme/widgets/pulls"},
		{"host in upper case", "https://GIT.example.com/acme/widgets.git", "", "", "/repos/acme/widgets/pulls"},
		{"owner and repo given", "https://git.example.com/sub/path/acme/w.git", "team", "gadgets", "/repos/team/gadgets/pulls"},
		{"repo given", "https://git.example.com/acme/widgets.git", "", "fork", "/repos/acme/fork/pulls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := forgetest.New(t, forge.KindGitHub, testToken)
			s.Reply = func(map[string]any) (int, any) { return http.StatusCreated, s.Pull(5, "acme", testBranch, "main") }
			pr := basePR()
			pr.Owner, pr.Repo = tc.owner, tc.repo
			got, err := forge.New([]forge.Host{s.Host("git.example.com")}, nil).Open(ctxTimeout(t), tc.remote, pr)
			if err != nil || got.Number != 5 {
				t.Fatalf("Open = %+v, %v", got, err)
			}
			if paths := s.CreatePaths(); len(paths) != 1 || paths[0] != "/api/v3"+tc.wantPath {
				t.Errorf("paths %q, want /api/v3%s", paths, tc.wantPath)
			}
		})
	}
}

// TestOpenRefuses refuses what it cannot do safely before sending anything.
func TestOpenRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
	}))
	defer srv.Close()
	gitea := forge.Host{Kind: forge.KindGitea, Host: "git.example.com", APIBase: srv.URL + "/api/v1", Token: testToken}
	cases := []struct {
		name    string
		hosts   []forge.Host
		remote  string
		pr      func(*forge.PullRequest)
		wantErr []string
		wantIs  error
	}{
		{"unknown host", []forge.Host{gitea}, "https://code.example.org/acme/widgets.git", nil,
			[]string{`"code.example.org"`, "AGENTBOX_GIT_HOSTS", "gitea=code.example.org"}, forge.ErrUnknownHost},
		{"github.com without a token", nil, "git@github.com:acme/widgets.git", nil,
			[]string{"github.com", "AGENTBOX_GIT_TOKEN"}, forge.ErrNoToken},
		{"http to a remote API", []forge.Host{{Kind: forge.KindGitea, Host: "git.example.com", APIBase: "http://git.example.com/api/v1", Token: testToken}},
			testRemote, nil, []string{"https"}, nil},
		{"unknown kind", []forge.Host{{Kind: "gitlab", Host: "git.example.com", APIBase: srv.URL, Token: testToken}},
			testRemote, nil, []string{`"gitlab"`}, nil},
		{"local path", []forge.Host{gitea}, "/srv/git/widgets.git", nil, []string{"local path"}, nil},
		{"three-part path", []forge.Host{gitea}, "https://git.example.com/a/b/c.git", nil, []string{"owner/repository"}, nil},
		{"no title", []forge.Host{gitea}, testRemote, func(pr *forge.PullRequest) { pr.Title = " " }, []string{"title"}, nil},
		{"no base", []forge.Host{gitea}, testRemote, func(pr *forge.PullRequest) { pr.Base = "" }, []string{"base"}, nil},
		{"no head", []forge.Host{gitea}, testRemote, func(pr *forge.PullRequest) { pr.Head = "acme:" }, []string{"head"}, nil},
		{"bad owner", []forge.Host{gitea}, testRemote, func(pr *forge.PullRequest) { pr.Owner = "../admin" }, []string{"owner"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := basePR()
			if tc.pr != nil {
				tc.pr(&pr)
			}
			got, err := forge.New(tc.hosts, nil).Open(ctxTimeout(t), tc.remote, pr)
			checkOpen(t, openCase{wantErr: tc.wantErr, wantIs: tc.wantIs}, got, err)
		})
	}
}

// TestOpenCanceled ends the request when its ctx is canceled: timeouts
// come from the caller's ctx.
func TestOpenCanceled(t *testing.T) {
	arrived, done := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a closed connection only once the body is read
		close(arrived)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	ctx, cancel := context.WithCancel(ctxTimeout(t))
	go func() {
		<-arrived
		cancel()
	}()
	host := forge.Host{Kind: forge.KindGitHub, Host: "git.example.com", APIBase: srv.URL, Token: testToken}
	_, err := forge.New([]forge.Host{host}, nil).Open(ctx, testRemote, basePR())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open = %v, want context.Canceled", err)
	}
}

// TestOpenLimits refuses a response larger than the cap and a redirect
// that would send the token in clear over a network.
func TestOpenLimits(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{"huge response", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"html_url":"https://x/1","number":1,"body":"` + strings.Repeat("a", 5<<20) + `"}`))
		}, "larger than"},
		{"redirect to http", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://git.example.com/api/v3/repos/acme/widgets/pulls", http.StatusTemporaryRedirect)
		}, "loopback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			host := forge.Host{Kind: forge.KindGitHub, Host: "git.example.com", APIBase: srv.URL, Token: testToken}
			_, err := forge.New([]forge.Host{host}, srv.Client()).Open(ctxTimeout(t), testRemote, basePR())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Open = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

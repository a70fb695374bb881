package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/forge/forgetest"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// The pull-request calls of these tests go to forgetest's stand-in for
// GitHub's REST API, which checks them against GitHub's documented shape:
// the only stand-in here. The git servers (sshd, smart HTTP), Docker and
// the scheduler are real.

const (
	pushAuthor = "Robo Pusher <robo@example.com>"
	summary    = "Fix the failing test\n\nThe parser skipped the last line.\nNow it does not."
)

// summaryAgent runs the task as ShellAgent does, and ends a completed
// turn with summary, as the model's finish does.
type summaryAgent struct{}

func (summaryAgent) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	out, err := jobs.ShellAgent{}.Run(ctx, r)
	if out.Status == store.StatusComplete {
		out.Result = summary
	}
	return out, err
}

// startPush runs a scheduler with summaryAgent and a host git of cfg
// (author pushAuthor) that opens pull requests through prs.
func (e *env) startPush(t *testing.T, cfg githost.Config, prs jobs.PullRequests, mods ...func(*jobs.SchedulerConfig)) (*jobs.Service, *jobs.Repos) {
	t.Helper()
	cfg.Author = pushAuthor
	r, mod := e.withRepos(t, cfg)
	r.Forge, r.Timeout = prs, cfg.Timeout
	svc, _ := e.start(t, summaryAgent{}, append([]func(*jobs.SchedulerConfig){mod}, mods...)...)
	return svc, r
}

// gitHTTP is a smart HTTP git server whose token is also the token of a
// GitHub stand-in serving its host's pull requests.
type gitHTTP struct {
	*gittest.HTTP
	api *forgetest.StandIn
}

func startGitHTTP(t *testing.T) gitHTTP {
	web := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	return gitHTTP{web, forgetest.New(t, forge.KindGitHub, web.Password)}
}

func (g gitHTTP) forge() *forge.Client {
	return forge.New([]forge.Host{g.api.Host(strings.TrimPrefix(g.BaseURL, "http://"))}, nil)
}

// turnScript changes the workspace each turn (a marker tells the turns
// apart) and, from the second, fails if a secret of the host's is where
// the sandbox can read it, after the first turn's push.
func turnScript(secrets ...string) string {
	return `set -u
if [ -e turn1 ]; then
` + noSecretsScript(secrets...) + `
  echo "more" >> README.md
else
  touch turn1; echo "fixed" >> README.md; echo new > new.txt
fi`
}

// nextTurn starts ended job id's next turn with a follow-up message
// (what POST /v1/jobs/{id}/messages does) and returns the seq of its log's
// last event before the message.
func nextTurn(t *testing.T, svc *jobs.Service, id string) int64 {
	t.Helper()
	evs := eventsOf(t, svc, id)
	if _, _, err := svc.Reply(bg, id, "one more thing"); err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1].Seq
}

// gitEvents returns the job's git events of action, after seq after.
func gitEvents(t *testing.T, svc *jobs.Service, id, action string, after int64) []event.Git {
	t.Helper()
	var found []event.Git
	for _, ev := range eventsOf(t, svc, id) {
		var g event.Git
		if ev.Seq > after && ev.Type == event.TypeGit && json.Unmarshal(ev.Payload, &g) == nil && g.Action == action {
			found = append(found, g)
		}
	}
	return found
}

// TestPushAndPullRequest pushes a job's branch over SSH with a key file,
// and over smart HTTP with the token, where it also opens the pull
// request; then a second turn of each job pushes a fast-forward to the
// same branch and finds the pull request again.
func TestPushAndPullRequest(t *testing.T) {
	e := newEnv(t)
	sshd := gittest.StartSSH(t)
	web := startGitHTTP(t)
	cases := []struct {
		name, url, bare string
		cfg             githost.Config
		secret          string
		pr              bool
	}{
		{"ssh key file", sshd.URL("acme/widgets.git"), sshd.Path("acme/widgets.git"),
			githost.Config{SSHKey: sshd.KeyFile, SSHKnownHosts: sshd.KnownHosts}, keyLine(sshd.Key), false},
		{"http token and pull request", web.URL("acme/widgets.git"), web.Path("acme/widgets.git"),
			githost.Config{Token: web.Password}, web.Password, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := gittest.Commit(t, c.bare, "main", gittest.Files("README.md", "hello\n"))
			svc, _ := e.startPush(t, c.cfg, web.forge())
			repo := &store.Repo{URL: c.url, Ref: "main", Push: true}
			if c.pr {
				repo = &store.Repo{URL: c.url, Ref: "main", PullRequest: &store.PullRequest{Draft: true}}
			}
			j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: turnScript(c.secret), Repo: repo})
			if err != nil {
				t.Fatal(err)
			}
			j = await(t, svc, j.ID)
			first := checkPushed(t, svc, j, c.bare, base, 1)
			var url string
			if c.pr {
				url = checkPullRequest(t, svc, web.api, j, 0)
			}
			after := nextTurn(t, svc, j.ID)
			j = awaitAfter(t, svc, j.ID, after)
			if out := outputOf(t, svc, j.ID); j.Status != store.StatusComplete {
				t.Fatalf("turn 2: %s %q\n%s", j.Status, j.Error, out)
			}
			checkPushed(t, svc, j, c.bare, first, 2)
			if !c.pr {
				return
			}
			if again := checkPullRequest(t, svc, web.api, j, after); again != url {
				t.Errorf("turn 2's pull request %s, want the first %s", again, url)
			}
			if n := len(web.api.OpenPulls()); n != 1 {
				t.Errorf("%d pull requests open, want 1", n)
			}
		})
	}
}

// checkPushed checks that completed job j's branch is on the server's
// bare repository at the job's commit, made on parent by pushAuthor with
// the summary as its message, and that the commit and push events say so;
// it returns the commit.
func checkPushed(t *testing.T, svc *jobs.Service, j store.Job, bare, parent string, turn int) string {
	t.Helper()
	g, branch := j.Git, "agentbox/"+j.ID
	if j.Status != store.StatusComplete || g.Branch != branch || g.Commit == "" || !g.Pushed || g.Error != "" {
		t.Fatalf("job %s %q, git %+v\n%s", j.Status, j.Error, g, outputOf(t, svc, j.ID))
	}
	if got := gittest.Git(t, bare, "rev-parse", "refs/heads/"+branch); got != g.Commit {
		t.Errorf("server's %s = %s, want %s", branch, got, g.Commit)
	}
	if got := gittest.Git(t, bare, "rev-parse", g.Commit+"^"); got != parent {
		t.Errorf("parent of %s = %s, want %s (a fast-forward)", g.Commit, got, parent)
	}
	msg := "Fix the failing test\n\nThe parser skipped the last line.\nNow it does not.\n\nAgentbox-Job: " + j.ID
	if turn > 1 {
		msg += "\nAgentbox-Turn: 2"
	}
	if got := gittest.Git(t, bare, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", g.Commit); got != pushAuthor+"|"+pushAuthor+"|"+msg {
		t.Errorf("commit:\n%s\nwant author, committer %s and message:\n%s", got, pushAuthor, msg)
	}
	for _, action := range []string{"commit", "push"} {
		evs := gitEvents(t, svc, j.ID, action, 0)
		if len(evs) != turn || evs[turn-1].Commit != g.Commit || evs[turn-1].Branch != branch || evs[turn-1].Error != "" {
			t.Errorf("%s events %+v", action, evs)
		}
	}
	return g.Commit
}

// checkPullRequest checks the pull request the stand-in was asked for by
// job j's last turn, and that its URL is the job's and its event's.
func checkPullRequest(t *testing.T, svc *jobs.Service, api *forgetest.StandIn, j store.Job, after int64) string {
	t.Helper()
	creates, _ := api.Recorded()
	if len(creates) == 0 {
		t.Fatal("no pull request was asked for")
	}
	want := map[string]any{"title": "Fix the failing test", "head": "agentbox/" + j.ID, "base": "main", "draft": true}
	for k, v := range want {
		if got := creates[len(creates)-1][k]; got != v {
			t.Errorf("pull request %s = %#v, want %#v", k, got, v)
		}
	}
	if body, _ := creates[len(creates)-1]["body"].(string); !strings.Contains(body, "Now it does not.") || !strings.Contains(body, j.ID) {
		t.Errorf("pull request body %q", body)
	}
	evs := gitEvents(t, svc, j.ID, "pull_request", after)
	if len(evs) != 1 || evs[0].URL == "" || evs[0].URL != j.Git.PullRequestURL || evs[0].Error != "" {
		t.Fatalf("pull_request events %+v, job's URL %q", evs, j.Git.PullRequestURL)
	}
	return evs[0].URL
}

// TestNothingPushedWhenTheTurnFails: a turn that ends in error, or is
// canceled, commits and pushes nothing.
func TestNothingPushedWhenTheTurnFails(t *testing.T) {
	e := newFakeEnv(t)
	web := startGitHTTP(t)
	gittest.Commit(t, web.Path("acme/widgets.git"), "main", gittest.Files("README.md", "hello\n"))
	svc, _ := e.startPush(t, githost.Config{Token: web.Password}, web.forge())
	repo := &store.Repo{URL: web.URL("acme/widgets.git"), PullRequest: &store.PullRequest{Title: "never"}}
	failing, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo changed >> README.md; exit 3", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	canceled, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo changed >> README.md; touch started; sleep 300", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.workspaceHas(canceled.ID, "started") })
	if _, err := svc.Cancel(bg, canceled.ID); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]store.Status{failing.ID: store.StatusError, canceled.ID: store.StatusCanceled} {
		j := await(t, svc, id)
		if j.Status != want || j.Git.Commit != "" || j.Git.Pushed || j.Git.PullRequestURL != "" {
			t.Errorf("job %s, git %+v; want %s and nothing pushed", j.Status, j.Git, want)
		}
		if refs := gittest.Git(t, web.Path("acme/widgets.git"), "for-each-ref", "refs/heads/agentbox/"); refs != "" {
			t.Errorf("branches on the server: %s", refs)
		}
		for _, action := range []string{"commit", "push", "pull_request"} {
			if evs := gitEvents(t, svc, id, action, 0); len(evs) != 0 {
				t.Errorf("%s events %+v", action, evs)
			}
		}
	}
	if creates, _ := web.api.Recorded(); len(creates) != 0 {
		t.Errorf("pull requests asked for: %v", creates)
	}
}

// TestFailedHandBackLeavesTheJobComplete: a push the server refuses (a
// pre-receive hook; a branch of someone else's that is no ancestor) or a
// pull request the API refuses leaves the job complete, the failure in
// its git.error and an event, and its diff as it was.
func TestFailedHandBackLeavesTheJobComplete(t *testing.T) {
	e := newFakeEnv(t)
	cases := []struct {
		name   string
		prep   func(t *testing.T, web gitHTTP, bare string)
		branch string
		action string
		want   []string
		pushed bool
	}{
		{"pre-receive hook", func(t *testing.T, _ gitHTTP, bare string) {
			hook := "#!/bin/sh\necho 'pushes to agentbox/ are closed today' >&2\nexit 1\n"
			preReceive(t, bare, hook)
		}, "", "push", []string{"push", "pushes to agentbox/ are closed today", "pre-receive hook declined"}, false},
		{"not a fast-forward", func(t *testing.T, _ gitHTTP, bare string) {
			gittest.Commit(t, bare, "fix/parser", gittest.Files("theirs.txt", "someone else's\n"))
		}, "fix/parser", "push", []string{"push", "rejected"}, false},
		{"pull request refused", func(t *testing.T, web gitHTTP, _ string) {
			web.api.Reply = func(map[string]any) (int, any) {
				return http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration",
					"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request", "status": "403"}
			}
		}, "", "pull_request", []string{"pull_request", "HTTP 403", "Resource not accessible by integration"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			web := startGitHTTP(t)
			bare := web.Path("acme/widgets.git")
			gittest.Commit(t, bare, "main", gittest.Files("README.md", "hello\n"))
			c.prep(t, web, bare)
			svc, _ := e.startPush(t, githost.Config{Token: web.Password}, web.forge())
			j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo fixed >> README.md",
				Repo: &store.Repo{URL: web.URL("acme/widgets.git"), Branch: c.branch, PullRequest: &store.PullRequest{}}})
			if err != nil {
				t.Fatal(err)
			}
			j = await(t, svc, j.ID)
			if j.Status != store.StatusComplete || j.Error != "" || j.Git.Commit == "" || j.Git.Pushed != c.pushed || j.Git.PullRequestURL != "" {
				t.Fatalf("job %s %q, git %+v", j.Status, j.Error, j.Git)
			}
			evs := gitEvents(t, svc, j.ID, c.action, 0)
			if len(evs) != 1 || evs[0].Error == "" {
				t.Fatalf("%s events %+v", c.action, evs)
			}
			for _, want := range c.want {
				if !strings.Contains(j.Git.Error, want) {
					t.Errorf("git.error %q lacks %q", j.Git.Error, want)
				}
			}
			if strings.Contains(j.Git.Error+evs[0].Error, web.Password) {
				t.Errorf("the token is in the error: %q", j.Git.Error)
			}
			var d bytes.Buffer
			if err := svc.Diff(bg, j.ID, false, &d); err != nil || !strings.Contains(d.String(), "+fixed") {
				t.Errorf("diff after the failure: %v\n%s", err, d.String())
			}
		})
	}
}

// TestSubmitChecksHandBack: a pull request needs a hosted repository and
// a branch other than its base, and implies the push.
func TestSubmitChecksHandBack(t *testing.T) {
	svc := submitOnly(t, githost.Config{AllowLocal: true})
	pr := &store.PullRequest{}
	for _, repo := range []store.Repo{
		{URL: filepath.Join(t.TempDir(), "r.git"), PullRequest: pr},
		{URL: "file:///srv/acme/widgets.git", PullRequest: pr},
		{URL: "https://github.com/acme/widgets.git", Ref: "main", Branch: "main", PullRequest: pr},
		{URL: "https://github.com/acme/widgets.git", Ref: "refs/heads/fix", Branch: "fix", PullRequest: pr},
		{URL: "https://github.com/acme/widgets.git", PullRequest: &store.PullRequest{Title: strings.Repeat("t", 257)}},
		{URL: "https://github.com/acme/widgets.git", PullRequest: &store.PullRequest{Body: strings.Repeat("b", 64<<10)}},
	} {
		if _, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Repo: &repo}); !errors.Is(err, jobs.ErrBadRepo) || !strings.Contains(err.Error(), "pull_request") {
			t.Errorf("%+v: %v", repo, err)
		}
	}
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Repo: &store.Repo{URL: "git@github.com:acme/widgets.git", Ref: "main", PullRequest: pr}})
	if err != nil || !j.Repo.Push {
		t.Errorf("a pull request without push: %+v, %v", j.Repo, err)
	}
}

// preReceive makes hook the pre-receive hook of bare, a repository on
// the server.
func preReceive(t *testing.T, bare, hook string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(bare, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSlowPush: the lease outlives a push slower than it (the heartbeat
// runs until the outcome is recorded, while the reaper looks for expired
// leases), and a push slower than the step's bound is stopped and stated.
func TestSlowPush(t *testing.T) {
	e := newFakeEnv(t)
	web := startGitHTTP(t)
	bare := web.Path("acme/widgets.git")
	gittest.Commit(t, bare, "main", gittest.Files("README.md", "hello\n"))
	preReceive(t, bare, "#!/bin/sh\nwhile read old new ref; do case $ref in */slower) sleep 5;; *) sleep 1.5;; esac; done\n")
	// A lease shorter than both pushes (1.5 s and the 3 s timeout): only
	// the heartbeat, kept through the hand-back, keeps the job its
	// worker's. 500 ms lapsed on a loaded machine under -race (a heartbeat
	// stalled past it), which proved nothing about the hand-back.
	short := func(c *jobs.SchedulerConfig) {
		c.Lease, c.Heartbeat, c.ReapInterval = 1400*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	}
	svc, _ := e.startPush(t, githost.Config{Token: web.Password, Timeout: 3 * time.Second}, nil, short)
	for branch, pushed := range map[string]bool{"slow": true, "slower": false} {
		j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo fixed >> README.md",
			Repo: &store.Repo{URL: web.URL("acme/widgets.git"), Branch: branch, Push: true}})
		if err != nil {
			t.Fatal(err)
		}
		j = await(t, svc, j.ID)
		if j.Status != store.StatusComplete || j.Attempts != 1 || j.Git.Pushed != pushed {
			t.Fatalf("%s: job %s after %d attempts, git %+v", branch, j.Status, j.Attempts, j.Git)
		}
		if !pushed && (!strings.Contains(j.Git.Error, "push") || !strings.Contains(j.Git.Error, "timed out")) {
			t.Errorf("%s: git.error %q", branch, j.Git.Error)
		}
	}
}

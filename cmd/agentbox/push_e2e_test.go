package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/forge/forgetest"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// The pull requests of these tests go to forgetest's stand-in for GitHub's
// REST API, which checks each request against GitHub's documented shape:
// the only stand-in besides the scripted model. The git server (smart
// HTTP with basic auth), the server, Docker and the sandbox are real.

const e2eAuthor = "Robo Pusher <robo@example.com>"

// pushEnv is a git server holding acme/widgets.git on main, a GitHub
// stand-in for its host, and the AGENTBOX_GIT_ settings that reach both
// with one token.
func pushEnv(t *testing.T) (*gittest.HTTP, *forgetest.StandIn, string) {
	t.Helper()
	web := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	api := forgetest.New(t, forge.KindGitHub, web.Password)
	base := gittest.Commit(t, web.Path("acme/widgets.git"), "main", gittest.Files("calc.py", "def add(a, b):\n    return a - b\n"))
	t.Setenv("AGENTBOX_GIT_TOKEN", web.Password)
	t.Setenv("AGENTBOX_GIT_AUTHOR", e2eAuthor)
	t.Setenv("AGENTBOX_GIT_HOSTS", "github="+strings.TrimPrefix(web.BaseURL, "http://")+"="+api.APIBase())
	return web, api, base
}

// TestSubmitPushAndPullRequest: `agentbox submit --repo --pr --draft` on
// a server whose agent talks to a scripted model; the model fixes the
// code and finishes with a summary; the server commits the change as
// AGENTBOX_GIT_AUTHOR with the summary as its message, pushes the branch
// with the token and opens the draft pull request, and the job's status,
// its events and `agentbox status` say so, with no credential in them.
func TestSubmitPushAndPullRequest(t *testing.T) {
	web, api, base := pushEnv(t)
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"})),
		step(llmtest.Call("finish", map[string]any{"summary": "Fix add: it subtracted\n\nadd returned a - b; it returns a + b now."})),
	}})
	t.Setenv("AGENTBOX_URL", s.url)
	t.Setenv("AGENTBOX_TOKEN", testToken)
	out, _ := mustRun(t, "submit", "--repo", web.URL("acme/widgets.git"), "--ref", "main", "--pr", "--draft", "Fix the failing test")
	id := strings.TrimSpace(out)
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	branch := "agentbox/" + id
	commit := gittest.Git(t, web.Path("acme/widgets.git"), "rev-parse", "refs/heads/"+branch)
	want := e2eAuthor + "|Fix add: it subtracted\n\nadd returned a - b; it returns a + b now.\n\nAgentbox-Job: " + id + "\n|" + base
	if got := gittest.Git(t, web.Path("acme/widgets.git"), "log", "-1", "--format=%an <%ae>|%B|%P", commit); got != want {
		t.Errorf("the pushed commit:\n%s\nwant\n%s", got, want)
	}
	creates, _ := api.Recorded()
	if len(creates) != 1 || creates[0]["title"] != "Fix add: it subtracted" || creates[0]["head"] != branch || creates[0]["base"] != "main" || creates[0]["draft"] != true {
		t.Fatalf("pull requests asked for: %v", creates)
	}
	prURL := "https://git.example.com/acme/widgets/pull/1"
	var j struct {
		Repo struct {
			Push bool `json:"push"`
		} `json:"repo"`
		Git struct {
			Branch, Commit string
			Pushed         bool
			PullRequestURL string `json:"pull_request_url"`
			Error          string
		} `json:"git"`
	}
	s.do("GET", "/v1/jobs/"+id, nil, &j)
	if g := j.Git; !j.Repo.Push || g.Branch != branch || g.Commit != commit || !g.Pushed || g.PullRequestURL != prURL || g.Error != "" {
		t.Errorf("job's repo and git: %+v", j)
	}
	var actions []string
	for _, ev := range s.events(id) {
		if ev.Type == "git" {
			actions = append(actions, gitAction(ev.Payload))
		}
	}
	if got := strings.Join(actions, ","); got != "clone,commit,push,pull_request "+prURL {
		t.Errorf("git events: %s", got)
	}
	status, _ := mustRun(t, "status", id)
	for _, want := range []string{"branch:        " + branch + " (pushed)", "commit:        " + commit, "pull request:  " + prURL} {
		if !strings.Contains(status, want) {
			t.Errorf("agentbox status lacks %q:\n%s", want, status)
		}
	}
	if d := s.get(t, "/v1/jobs/"+id+"/diff", 200); !strings.Contains(string(d), "+    return a + b") {
		t.Errorf("diff:\n%s", d)
	}
	for _, path := range []string{"/v1/jobs/" + id, "/v1/jobs/" + id + "/events?limit=1000"} {
		if b := s.get(t, path, 200); strings.Contains(string(b), web.Password) {
			t.Errorf("%s holds the token", path)
		}
	}
}

// gitAction is a git event's action, with the URL of a pull request.
func gitAction(payload []byte) string {
	g := struct{ Action, URL, Error string }{}
	_ = json.Unmarshal(payload, &g)
	if g.Action == "pull_request" {
		return g.Action + " " + g.URL
	}
	return g.Action + strings.Repeat(" failed", min(len(g.Error), 1))
}

// TestRunPushesAndShowsThePullRequest: `agentbox run --repo --pr` pushes
// the branch, opens the pull request, and ends with both.
func TestRunPushesAndShowsThePullRequest(t *testing.T) {
	instance := sandboxEnv(t)
	web, api, _ := pushEnv(t)
	t.Setenv("AGENTBOX_AGENT", "shell")
	_, errOut, err := run(context.Background(), "run", "--repo", web.URL("acme/widgets.git"), "--branch", "fix/add",
		"--pr-title", "Fix add", "sed -i 's/a - b/a + b/' calc.py")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	commit := gittest.Git(t, web.Path("acme/widgets.git"), "rev-parse", "refs/heads/fix/add")
	for _, want := range []string{"[git push " + web.URL("acme/widgets.git") + " branch fix/add " + commit[:12] + "]",
		"\nbranch: fix/add (pushed)\n", "\ncommit: " + commit + "\n", "\npull request: https://git.example.com/acme/widgets/pull/1\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("run's output lacks %q:\n%s", want, errOut)
		}
	}
	if creates, _ := api.Recorded(); len(creates) != 1 || creates[0]["title"] != "Fix add" || creates[0]["head"] != "fix/add" {
		t.Errorf("pull requests asked for: %v", creates)
	}
	for _, args := range [][]string{{"run", "--push", "task"}, {"run", "--draft", "task"}, {"submit", "--pr", "task"}, {"submit", "--branch", "x", "task"}} {
		if _, _, err := run(context.Background(), args...); err == nil || !strings.Contains(err.Error(), "needs --repo") {
			t.Errorf("agentbox %s: %v", strings.Join(args, " "), err)
		}
	}
	assertNoSandboxes(t, instance)
}

package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/wiring"
)

// handBackFlags are how submit and run ask for a repository job's result
// back: the branch it is committed on, the push, the pull request.
type handBackFlags struct {
	branch, title, body string
	push, pr, draft     bool
}

func (f *handBackFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&f.branch, "branch", "", "with --repo: the branch the result is committed on (default agentbox/<job id>)")
	fl.BoolVar(&f.push, "push", false, "with --repo: push the branch with the host's credentials when the job completes")
	fl.BoolVar(&f.pr, "pr", false, "with --repo: push, and open a pull request of the branch (GitHub, Gitea, Forgejo: AGENTBOX_GIT_HOSTS)")
	fl.StringVar(&f.title, "pr-title", "", "the pull request's title (default: the first line of the job's summary); implies --pr")
	fl.StringVar(&f.body, "pr-body", "", "the pull request's body (default: the job's summary); implies --pr")
	fl.BoolVar(&f.draft, "draft", false, "open the pull request as a draft; implies --pr")
}

// check says which flag needs --repo, when repo is empty.
func (f handBackFlags) check(repo string) error {
	if repo != "" {
		return nil
	}
	for _, c := range []struct {
		name string
		set  bool
	}{{"--branch", f.branch != ""}, {"--push", f.push}, {"--pr", f.pr}, {"--pr-title", f.title != ""}, {"--pr-body", f.body != ""}, {"--draft", f.draft}} {
		if c.set {
			return fmt.Errorf("%s needs --repo", c.name)
		}
	}
	return nil
}

// pullRequest is the pull request the flags ask for; nil for none.
func (f handBackFlags) pullRequest() *store.PullRequest {
	if !f.pr && f.title == "" && f.body == "" && !f.draft {
		return nil
	}
	return &store.PullRequest{Title: f.title, Body: f.body, Draft: f.draft}
}

// toWire sets on r (nil without --repo) what the flags ask for.
func (f handBackFlags) toWire(r *wire.Repo) {
	if r == nil {
		return
	}
	r.Branch, r.Push = f.branch, f.push
	if pr := f.pullRequest(); pr != nil {
		r.PullRequest = &wire.PullRequest{Title: pr.Title, Body: pr.Body, Draft: pr.Draft}
	}
}

// toRun sets on r what the flags ask for.
func (f handBackFlags) toRun(r *wiring.RunRequest) {
	r.Branch, r.Push, r.PullRequest = f.branch, f.push, f.pullRequest()
}

package main

import (
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/wiring"
)

// addHandBackFlags adds how submit and run ask for a repository job's
// result back: --branch, --push, --pr, --pr-title, --pr-body, --draft.
func addHandBackFlags(fl *pflag.FlagSet, f *wiring.HandBackFlags) {
	fl.StringVar(&f.Branch, "branch", "", "with --repo: the branch the result is committed on (default agentbox/<job id>)")
	fl.BoolVar(&f.Push, "push", false, "with --repo: push the branch with the host's credentials when the job completes")
	fl.BoolVar(&f.PR, "pr", false, "with --repo: push, and open a pull request of the branch (GitHub, Gitea, Forgejo: AGENTBOX_GIT_HOSTS)")
	fl.StringVar(&f.Title, "pr-title", "", "the pull request's title (default: the first line of the job's summary); implies --pr")
	fl.StringVar(&f.Body, "pr-body", "", "the pull request's body (default: the job's summary); implies --pr")
	fl.BoolVar(&f.Draft, "draft", false, "open the pull request as a draft; implies --pr")
}

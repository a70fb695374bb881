package jobs

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

func TestCommitMessage(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, c := range []struct {
		name, task, summary string
		turn                int
		want                string
	}{
		{"summary", "the task", "Fix it\n\nin detail", 1, "Fix it\n\nin detail\n\nAgentbox-Job: job_1\n"},
		{"a later turn", "the task", "Fix it", 3, "Fix it\n\nAgentbox-Job: job_1\nAgentbox-Turn: 3\n"},
		{"no summary", "Do the thing\nwell", "", 1, "Do the thing\n\nwell\n\nAgentbox-Job: job_1\n"},
		{"nothing", " ", "\x00", 1, "agentbox job job_1\n\nAgentbox-Job: job_1\n"},
		{"control characters", "t", "Fi\x00x\r\x1b[31m it\n\ndone", 1, "Fix[31m it\n\ndone\n\nAgentbox-Job: job_1\n"},
		{"long subject", "t", long, 1, strings.TrimSpace(long[:69]) + "...\n\nAgentbox-Job: job_1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := commitMessage(store.Job{ID: "job_1", Task: c.task, Turn: c.turn}, c.summary)
			if got != c.want {
				t.Errorf("commitMessage = %q, want %q", got, c.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	if got := clip("aé", 2); got != "a\n[…]" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("abc", 3); got != "abc" {
		t.Errorf("clip = %q", got)
	}
}

func TestApplyGitKeepsTheBase(t *testing.T) {
	g := store.Git{BaseCommit: "b", Branch: "x", Commit: "c1", Pushed: true, PullRequestURL: "u", Error: "old"}
	applyGit(&g, &store.Git{BaseCommit: "other", Branch: "x", Commit: "c2", PullRequestURL: "u"})
	if g != (store.Git{BaseCommit: "b", Branch: "x", Commit: "c2", PullRequestURL: "u"}) {
		t.Errorf("git %+v", g)
	}
	applyGit(&g, nil)
	if g.Commit != "c2" {
		t.Errorf("nil changed it: %+v", g)
	}
}

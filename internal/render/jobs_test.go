package render

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
)

func TestJobShowsTheGitOutcome(t *testing.T) {
	j := wire.Job{JobID: "job_1", Status: "complete", Repo: &wire.Repo{URL: "https://h/o/r.git", Push: true},
		Git: &wire.Git{BaseCommit: "b0", Branch: "agentbox/job_1", Commit: "c1", Error: "push: git push: rejected"}}
	var b strings.Builder
	if err := Job(&b, j); err != nil {
		t.Fatal(err)
	}
	status := regexp.MustCompile(`: +`).ReplaceAllString(b.String(), ": ")
	for _, want := range []string{"\nbranch: agentbox/job_1 (not pushed)\n", "\nbase: b0\n", "\ncommit: c1\n", "\ngit error: push: git push: rejected\n"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	g := wire.Git{Branch: "fix", Commit: "c2", Pushed: true, PullRequestURL: "https://h/o/r/pull/1", BaseCommit: "b0"}
	if err := GitOutcome(&b, true, g); err != nil {
		t.Fatal(err)
	}
	if want := "branch: fix (pushed)\ncommit: c2\npull request: https://h/o/r/pull/1\n"; b.String() != want {
		t.Errorf("GitOutcome:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	_ = GitOutcome(&b, false, wire.Git{Branch: "agentbox/job_2", Commit: "c3"})
	if want := "branch: agentbox/job_2\ncommit: c3\n"; b.String() != want {
		t.Errorf("GitOutcome without a push:\n%s", b.String())
	}
}

// TestJobShowsWorkerAndQueue: a running job names its worker, a pending
// one its place in the queue.
func TestJobShowsWorkerAndQueue(t *testing.T) {
	for _, tc := range []struct {
		j    wire.Job
		want string
	}{
		{wire.Job{JobID: "job_1", Status: "running", Worker: "host-1a2b"}, "\nworker: host-1a2b\n"},
		{wire.Job{JobID: "job_2", Status: "pending", QueuePosition: 3}, "\nqueue position: 3\n"},
	} {
		var b strings.Builder
		if err := Job(&b, tc.j); err != nil {
			t.Fatal(err)
		}
		if got := regexp.MustCompile(`: +`).ReplaceAllString(b.String(), ": "); !strings.Contains(got, tc.want) {
			t.Errorf("status lacks %q:\n%s", tc.want, b.String())
		}
	}
}

// TestJobsDropControls: a job's result (the model's words), error and git
// error (a remote's answer) reach the terminal without control characters.
func TestJobsDropControls(t *testing.T) {
	const evil = "a\x1b]52;c;aGk=\x07b\u009b2Jc\x1b[1A"
	j := wire.Job{JobID: "job_1", Status: "error", Task: evil, Error: evil, Result: evil, Model: evil,
		Repo: &wire.Repo{URL: evil}, Git: &wire.Git{Branch: evil, Error: evil}}
	var b strings.Builder
	_ = Job(&b, j)
	_ = Jobs(&b, []wire.Job{j})
	_ = GitOutcome(&b, true, *j.Git)
	_ = Outcome(&b, "job_1", j)
	if strings.ContainsAny(b.String(), "\x1b\x07\u009b") {
		t.Errorf("shown as %q", b.String())
	}
}

package render

import (
	"bytes"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
)

// TestSummary: how a job ended, its usage, result or error, and what the
// host did with its repository, without the sandbox's control characters.
func TestSummary(t *testing.T) {
	var b bytes.Buffer
	j := wire.Job{JobID: "job_1", Status: "error", Steps: 4, Error: "tests fail\x1b[2J",
		Usage: wire.Usage{InputTokens: 100, CacheReadTokens: 50, CacheWriteTokens: 10, OutputTokens: 7, CostUSD: 0.5},
		Repo:  &wire.Repo{URL: "https://x/r.git", Push: true}, Git: &wire.Git{Branch: "agentbox/job_1", Commit: "abc", Error: "push refused"}}
	if err := Summary(&b, j); err != nil {
		t.Fatal(err)
	}
	want := "\njob job_1 error after 4 steps, 160 tokens in (50 from cache), 7 out, $0.5000\nerror: tests fail[2J\n" +
		"branch: agentbox/job_1 (not pushed)\ncommit: abc\ngit error: push refused\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
	b.Reset()
	Summary(&b, wire.Job{JobID: "job_2", Status: "complete", Steps: 1, Result: "done"})
	if want := "\njob job_2 complete after 1 step\nresult: done\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

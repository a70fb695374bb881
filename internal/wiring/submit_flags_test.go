package wiring

import (
	"strings"
	"testing"
)

// TestSubmitFlagsRequest: the flags become the request, and each mistake
// names its flag, the starting point's first.
func TestSubmitFlagsRequest(t *testing.T) {
	f := SubmitFlags{Memory: "4g", MaxSteps: 7, Meta: []string{"ticket=OPS-12"}, Repo: "https://example.com/r.git", Ref: "main",
		HandBack: HandBackFlags{PR: true, Title: "fix"}}
	req, err := f.Request(strings.NewReader("from stdin"), "-")
	if err != nil || req.Task != "from stdin" || req.Limits == nil || req.Limits.Memory != 4<<30 || req.Limits.MaxSteps != 7 ||
		req.Metadata["ticket"] != "OPS-12" || req.Repo == nil || req.Repo.Ref != "main" || req.Repo.PullRequest == nil || req.Repo.PullRequest.Title != "fix" {
		t.Fatalf("request %+v, %v", req, err)
	}
	bad := SubmitFlags{Memory: "lots", Exclude: []string{".venv"}, Meta: []string{"novalue"}, Ref: "main", HandBack: HandBackFlags{Push: true}}
	_, err = bad.Request(nil, "task")
	want := []string{"--exclude goes with --workspace", "--memory", "--meta \"novalue\"", "--ref needs --repo", "--push needs --repo"}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d %q, want it to start with %q", i, got[i], w)
		}
	}
}

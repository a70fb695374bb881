package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestView gets links for a pending job from an in-process server; what
// the links do is the API's tests' business.
func TestView(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	base := e.URL + "/v1/jobs/" + id
	out, errOut := mustRun(t, "view", id)
	if !strings.HasPrefix(out, base+"/desktop/?ticket=") || strings.Count(out, "\n") != 1 {
		t.Errorf("view printed %q", out)
	}
	if !strings.Contains(errOut, "within a minute") {
		t.Errorf("stderr %q", errOut)
	}
	if out, _ = mustRun(t, "view", "--jupyter", id); !strings.HasPrefix(out, base+"/jupyter/?ticket=") {
		t.Errorf("view --jupyter printed %q", out)
	}
	out, _ = mustRun(t, "view", "--json", id)
	var l wire.ViewerLinks
	if err := json.Unmarshal([]byte(out), &l); err != nil || !strings.HasPrefix(l.DesktopURL, base+"/desktop/?ticket=") ||
		!strings.HasPrefix(l.JupyterURL, base+"/jupyter/?ticket=") || l.ExpiresAt.IsZero() {
		t.Errorf("view --json: %v\n%s", err, out)
	}
	e.Finish(id, store.StatusComplete, "")
	_, _, err := runClient(context.Background(), "", "view", id)
	if err == nil || !strings.Contains(err.Error(), "sandbox was removed") {
		t.Errorf("ended job: %v", err)
	}
	if _, _, err := runClient(context.Background(), "", "view", "job_nope"); err == nil || !strings.Contains(err.Error(), "no job job_nope on") {
		t.Errorf("unknown job: %v", err)
	}
}

func TestViewHelp(t *testing.T) {
	out, _, err := runClient(context.Background(), "", "view", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one minute", "works once", "--jupyter", "--json", "8 hours"} {
		if !strings.Contains(out, s) {
			t.Errorf("view --help lacks %q:\n%s", s, out)
		}
	}
}

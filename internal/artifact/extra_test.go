package artifact_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
)

func TestExtraFiles(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"agentbox.diff": "the agent's own", "a.txt": "a"})
	z, rep := zipOf(t, ws, artifact.Options{Extra: []artifact.Extra{
		{Name: "agentbox.diff", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("diff --git a/x b/x\n")), nil }},
		{Name: "broken.txt", Open: func() (io.ReadCloser, error) { return nil, errors.New("no base commit") }},
	}})
	if got := z.entries["agentbox.diff"].body; got != "diff --git a/x b/x\n" {
		t.Errorf("agentbox.diff = %q", got)
	}
	if z.order[0] != "agentbox.diff" {
		t.Errorf("extra files come first: %v", z.order)
	}
	if got := z.entries["agentbox_2.diff"].body; got != "the agent's own" {
		t.Errorf("the workspace's agentbox.diff = %q (entries %v)", got, z.order)
	}
	if _, ok := z.entries["broken.txt"]; ok {
		t.Error("an extra that failed is in the zip")
	}
	for _, want := range []string{`left out "broken.txt": could not be made: no base commit`,
		`stored "agentbox.diff" as "agentbox_2.diff": the zip keeps this name for agentbox's own agentbox.diff`} {
		if !strings.Contains(z.manifest, want) {
			t.Errorf("manifest lacks %q:\n%s", want, z.manifest)
		}
	}
	if rep.Len() != 2 {
		t.Errorf("report: %+v", rep)
	}
}

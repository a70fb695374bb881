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

// TestExtraNoneOrCut: an extra the job has nothing for is left out without
// a note, and the workspace keeps its own file of that name; an extra cut
// short is stored and the manifest says why.
func TestExtraNoneOrCut(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"network.jsonl": "the agent's own"})
	z, rep := zipOf(t, ws, artifact.Options{Extra: []artifact.Extra{
		{Name: "network.jsonl", Open: func() (io.ReadCloser, error) { return nil, artifact.ErrNoExtra }},
		{Name: "log.jsonl", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("{}\n")), nil },
			Cut: func() string { return "cut after 1 line" }},
	}})
	if got := z.entries["network.jsonl"].body; got != "the agent's own" {
		t.Errorf("network.jsonl = %q (entries %v)", got, z.order)
	}
	if got := z.entries["log.jsonl"].body; got != "{}\n" {
		t.Errorf("log.jsonl = %q", got)
	}
	if want := `changed "log.jsonl": cut after 1 line`; !strings.Contains(z.manifest, want) || rep.Len() != 1 {
		t.Errorf("manifest lacks %q (report %+v):\n%s", want, rep, z.manifest)
	}
}

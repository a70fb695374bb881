package jobs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestEndedDiffIsKeptUntilTheJobRunsAgain: an ended job's diff is made
// once and given again (the workspace is not read twice: a file put in
// it since is not in it), until a follow-up turn runs the job again.
func TestEndedDiffIsKeptUntilTheJobRunsAgain(t *testing.T) {
	e := newEnv(t)
	svc, _, _ := e.startWithRepos(t, githost.Config{})
	j := await(t, svc, submit(t, svc, "echo turn >> out.txt", store.Limits{}))
	if j.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", j.Status, j.Error)
	}
	diffOf := func() string {
		t.Helper()
		var b bytes.Buffer
		if err := svc.Diff(bg, j.ID, false, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := diffOf()
	mustHave(t, "diff", first, "+turn", "+++ b/out.txt")
	dir, err := workspace.NewLocal(e.dir).Prepare(bg, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "later.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again := diffOf(); again != first {
		t.Errorf("second diff of the ended job was made again:\n%s\nwant the first:\n%s", again, first)
	}
	if _, _, err := svc.Reply(bg, j.ID, "once more"); err != nil {
		t.Fatal(err)
	}
	if j = awaitTurn(t, svc, j.ID, 2); j.Status != store.StatusComplete {
		t.Fatalf("turn 2: %s %s", j.Status, j.Error)
	}
	d := diffOf()
	mustHave(t, "diff after turn 2", d, "+++ b/later.txt")
	if strings.Count(d, "+turn") != 2 {
		t.Errorf("diff after turn 2 has %d lines +turn, want 2:\n%s", strings.Count(d, "+turn"), d)
	}
}

// TestDiffUnderTheFloor: no diff is spooled into a data dir whose
// filesystem is under the free-space floor: the diff API's error and the
// zip's manifest say why, naming the setting.
func TestDiffUnderTheFloor(t *testing.T) {
	e := newEnv(t)
	svc, r, _ := e.startWithRepos(t, githost.Config{})
	j := await(t, svc, submit(t, svc, "echo hello > out.txt", store.Limits{}))
	r.MinFree, r.DiskFree = 1<<62, docker.DiskFree
	err := svc.Diff(bg, j.ID, false, io.Discard)
	if !errors.Is(err, jobs.ErrDiffUnavailable) || !strings.Contains(err.Error(), "AGENTBOX_MIN_FREE_DISK") {
		t.Fatalf("diff under the floor: %v; want ErrDiffUnavailable naming AGENTBOX_MIN_FREE_DISK", err)
	}
	rep, err := svc.Artifacts(bg, j.ID, io.Discard, artifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.String(), jobs.DiffName) || !strings.Contains(rep.String(), "AGENTBOX_MIN_FREE_DISK") {
		t.Errorf("zip's manifest does not say why it has no diff:\n%s", rep.String())
	}
	r.MinFree = 0
	if err := svc.Diff(bg, j.ID, false, io.Discard); err != nil {
		t.Errorf("diff over the floor: %v", err)
	}
}

func mustHave(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, s)
		}
	}
}

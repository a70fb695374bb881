package jobs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestEndedDiffIsKeptUntilTheJobRunsAgain: an ended job's diff is made
// once and given again (the workspace is not read twice: a file put in
// it since is not in it), until a follow-up turn runs the job again.
func TestEndedDiffIsKeptUntilTheJobRunsAgain(t *testing.T) {
	e := newFakeEnv(t)
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
	e := newFakeEnv(t)
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

// countingGit is a git binary for githost.Config.Git: the host's git,
// each run counted as a line of the file it returns.
func countingGit(t *testing.T) (bin, runs string) {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, runs = filepath.Join(dir, "git"), filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho run >> '" + runs + "'\nexec '" + git + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, runs
}

// gitRuns is how many times countingGit ran.
func gitRuns(t *testing.T, runs string) int {
	t.Helper()
	b, err := os.ReadFile(runs)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// diffFiles is what the job's diffs dir holds.
func diffFiles(t *testing.T, e *env, id string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.dir, "git", id+".diffs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
	}
	return names
}

// TestDiffOverItsBound: a diff larger than MaxDiff is refused naming
// its size and AGENTBOX_GIT_MAX_DIFF (the zip's manifest says so), and
// leaves no spool behind; asking again answers the same without running
// git, until a follow-up turn runs the job again.
func TestDiffOverItsBound(t *testing.T) {
	e := newFakeEnv(t)
	bin, runs := countingGit(t)
	svc, r, _ := e.startWithRepos(t, githost.Config{Git: bin})
	j := await(t, svc, submit(t, svc, "seq 1 2000 >> out.txt", store.Limits{}))
	if j.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", j.Status, j.Error)
	}
	r.MaxDiff = 4 << 10
	err := svc.Diff(bg, j.ID, false, io.Discard)
	if !errors.Is(err, jobs.ErrDiffUnavailable) || !strings.Contains(err.Error(), "AGENTBOX_GIT_MAX_DIFF") || !strings.Contains(err.Error(), "4KiB") {
		t.Fatalf("diff over its bound: %v; want ErrDiffUnavailable naming 4KiB and AGENTBOX_GIT_MAX_DIFF", err)
	}
	for _, name := range diffFiles(t, e, j.ID) {
		if !strings.HasSuffix(name, ".refused") {
			t.Errorf("diffs dir holds %s after a refused diff", name)
		}
	}
	before := gitRuns(t, runs)
	again := svc.Diff(bg, j.ID, false, io.Discard)
	if again == nil || again.Error() != err.Error() || !errors.Is(again, jobs.ErrDiffUnavailable) {
		t.Errorf("second diff: %v; want the first refusal: %v", again, err)
	}
	rep, zerr := svc.Artifacts(bg, j.ID, io.Discard, artifact.Options{})
	if zerr != nil {
		t.Fatal(zerr)
	}
	if !strings.Contains(rep.String(), jobs.DiffName) || !strings.Contains(rep.String(), "AGENTBOX_GIT_MAX_DIFF") {
		t.Errorf("zip's manifest does not say why it has no diff:\n%s", rep.String())
	}
	if n := gitRuns(t, runs); n != before {
		t.Errorf("asking again for a refused diff ran git %d times; want none", n-before)
	}
	if _, _, err := svc.Reply(bg, j.ID, "once more"); err != nil {
		t.Fatal(err)
	}
	if j = awaitTurn(t, svc, j.ID, 2); j.Status != store.StatusComplete {
		t.Fatalf("turn 2: %s %s", j.Status, j.Error)
	}
	r.MaxDiff = 0
	var d bytes.Buffer
	if err := svc.Diff(bg, j.ID, false, &d); err != nil {
		t.Fatalf("diff after turn 2, within the default bound: %v", err)
	}
	mustHave(t, "diff after turn 2", d.String(), "+++ b/out.txt", "+2000")
	for _, name := range diffFiles(t, e, j.ID) {
		if strings.HasSuffix(name, ".refused") {
			t.Errorf("turn 1's refusal %s outlived turn 2", name)
		}
	}
}

// TestEndedPatchIsKept: an ended repository job's patch is made once and
// kept beside its diff, also when asked for four times at once: asking
// again neither runs git nor spools again.
func TestEndedPatchIsKept(t *testing.T) {
	e := newFakeEnv(t)
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	bin, runs := countingGit(t)
	svc, r, _ := e.startWithRepos(t, githost.Config{AllowLocal: true, Git: bin})
	r.Diffs = 4
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo changed >> README.md", Repo: &store.Repo{URL: repo}})
	if err != nil {
		t.Fatal(err)
	}
	if j = await(t, svc, j.ID); j.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", j.Status, j.Error)
	}
	patchOf := func() (string, error) {
		var b bytes.Buffer
		err := svc.Diff(bg, j.ID, true, &b)
		return b.String(), err
	}
	before := gitRuns(t, runs)
	got, errs := make(chan string, 4), make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p, err := patchOf()
			got <- p
			errs <- err
		})
	}
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	first := <-got
	mustHave(t, "patch", first, "Subject: [PATCH]", "+changed")
	for p := range got {
		if p != first {
			t.Errorf("patches asked for at once differ:\n%s\nand\n%s", p, first)
		}
	}
	atOnce := gitRuns(t, runs) - before
	if again, err := patchOf(); err != nil || again != first {
		t.Errorf("second patch differs (%v):\n%s\nwant:\n%s", err, again, first)
	}
	if n := gitRuns(t, runs) - before; n != atOnce {
		t.Errorf("asking again for an ended job's patch ran git %d times; want none", n-atOnce)
	}
	kept := diffFiles(t, e, j.ID)
	if len(kept) != 1 || !strings.HasSuffix(kept[0], ".patch") {
		t.Fatalf("diffs dir holds %q; want one kept patch", kept)
	}
	if err := os.Remove(filepath.Join(e.dir, "git", j.ID+".diffs", kept[0])); err != nil {
		t.Fatal(err)
	}
	before = gitRuns(t, runs)
	if _, err := patchOf(); err != nil {
		t.Fatal(err)
	}
	if once := gitRuns(t, runs) - before; atOnce != once {
		t.Errorf("four requests at once ran git %d times; one alone runs it %d times", atOnce, once)
	}
}

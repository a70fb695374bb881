package main

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"golang.org/x/sys/unix"
)

// The attacks of issue 25 on the host's reading of a workspace into git:
// each workspace is made by a job's bash step in a real sandbox, from a
// script of the scripted model, and read back through the real API.

// pyDeep makes d, 16 nested directories of 250 bytes each (4,015 bytes).
const pyDeep = `import os
d = "/".join("d%02d" % i + "x" * 247 for i in range(16))
os.makedirs(d)
`

// bashPython is a bash command running the Python program prog.
func bashPython(prog string) string { return "python3 - <<'EOF'\n" + prog + "EOF\n" }

// pythonJob runs a job on a new server whose model runs prog in one bash
// step, then finishes; repo, if set, is the job's repository, pushed.
// setup runs before the server starts. It returns the server and the
// ended job's id.
func pythonJob(t *testing.T, prog, repo string, setup func(s *server)) (*server, string) {
	t.Helper()
	s, _ := newModelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": bashPython(prog)})),
		step(llmtest.Call("finish", map[string]any{"summary": "Make the files"})),
	}})
	if setup != nil {
		setup(s)
	}
	s.start()
	body := map[string]any{"task": "make the files"}
	if repo != "" {
		body["repo"] = map[string]any{"url": repo, "push": true}
	}
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", body, &j); code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	if j := s.awaitFinal([]string{j.JobID})[j.JobID]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	return s, j.JobID
}

// handedBack checks that job id's hand-back committed and pushed, and
// returns the paths of the pushed branch's tree.
func handedBack(t *testing.T, s *server, id, bare string) []string {
	t.Helper()
	var j struct {
		Git struct {
			Commit, Error string
			Pushed        bool
		} `json:"git"`
	}
	s.do("GET", "/v1/jobs/"+id, nil, &j)
	if g := j.Git; g.Commit == "" || !g.Pushed || g.Error != "" {
		t.Fatalf("the job's hand-back: %+v\n%s", g, s.logs)
	}
	return strings.Split(gittest.Git(t, bare, "ls-tree", "-r", "--name-only", "refs/heads/agentbox/"+id), "\n")
}

// 300 hard links to one 4 MiB .gitignore cost the sandbox 4 MiB of its
// quota, and the host a copy of 4 MiB each, in the job's git dir, at each
// diff and at the hand-back's commit: 1.2 GiB. The server's git dirs are
// on a tmpfs of the rules' budget and a little more, so the diff and the
// hand-back fail if the copies grow past it.
func TestHardLinkedRuleFilesStayWithinTheBudget(t *testing.T) {
	web, _, _ := pushEnv(t)
	// Each .gitignore ignores itself: the diff does not print 4 MiB 300 times.
	prog := `import os
rules = "# a comment to fill the file\n" * 144000 + "*.log\n.gitignore\n"
for i in range(300):
    d = "d%03d" % i
    os.mkdir(d)
    if i == 0:
        open(d + "/.gitignore", "w").write(rules)
    else:
        os.link("d000/.gitignore", d + "/.gitignore")
    open(d + "/x.log", "w").write("ignored\n")
    open(d + "/keep.txt", "w").write("kept\n")
`
	const budget = 32<<20 + 8<<20 // githost's maxRuleBytes, and the job's own objects
	s, id := pythonJob(t, prog, web.URL("acme/widgets.git"), func(s *server) {
		mountTmpfs(t, filepath.Join(s.dataDir, "git"), budget)
		// The diffs are spooled beside the git dirs, refused under the
		// free-space floor (2 GiB): on this tmpfs, the budget is the bound.
		s.env = append(s.env, "AGENTBOX_MIN_FREE_DISK=0")
	})
	paths := handedBack(t, s, id, web.Path("acme/widgets.git"))
	if len(paths) != 301 || !strings.Contains(strings.Join(paths, "\n"), "d299/keep.txt") {
		t.Errorf("the pushed tree holds %d paths, want calc.py and the 300 keep.txt: %.500q", len(paths), paths)
	}
	diffMemory(t, s, id) // for the record
	diff := string(s.get(t, "/v1/jobs/"+id+"/diff", http.StatusOK))
	if !strings.Contains(diff, "+++ b/d299/keep.txt") || strings.Contains(diff, "x.log") || strings.Contains(diff, ".gitignore") {
		t.Errorf("the diff, of %d bytes, lacks d299/keep.txt or holds what the rules ignore:\n%.2000s", len(diff), diff)
	}
}

// mountTmpfs mounts a tmpfs of size bytes at dir, unmounted at the end.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)+",mode=0700"); err != nil {
		t.Skipf("this test bounds the server's git dirs with a tmpfs, which needs root: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// A .gitignore at a path of 4,026 bytes was copied by its absolute path on
// the host, past PATH_MAX: the diff was a 500, artifacts.zip went without
// agentbox.diff, and the hand-back's commit failed.
func TestLongPathRuleFile(t *testing.T) {
	web, _, _ := pushEnv(t)
	prog := pyDeep + `for name, body in ((".gitignore", "*.log\n"), ("keep.txt", "kept\n"), ("x.log", "ignored\n")):
    open(d + "/" + name, "w").write(body)
`
	s, id := pythonJob(t, prog, web.URL("acme/widgets.git"), nil)
	paths := handedBack(t, s, id, web.Path("acme/widgets.git"))
	if len(paths) != 3 || !strings.HasSuffix(paths[1], "/.gitignore") || !strings.HasSuffix(paths[2], "/keep.txt") {
		t.Errorf("the pushed tree holds %d paths, want calc.py, the rules and keep.txt (x.log ignored): %.300q", len(paths), paths)
	}
	diff := string(s.get(t, "/v1/jobs/"+id+"/diff", http.StatusOK))
	if !strings.Contains(diff, "/keep.txt\n") || strings.Contains(diff, "x.log") {
		t.Errorf("the diff lacks keep.txt or holds x.log:\n%.1000s", diff)
	}
	b := s.get(t, "/v1/jobs/"+id+"/artifacts.zip", http.StatusOK)
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var zipped []byte
	for _, f := range zr.File {
		if f.Name == "agentbox.diff" {
			rc, _ := f.Open()
			zipped, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	if string(zipped) != diff {
		t.Errorf("artifacts.zip's agentbox.diff (%d bytes) is not the diff (%d bytes)", len(zipped), len(diff))
	}
}

// maxWalkGrowth bounds how much the server's resident memory may grow
// taking the diff of TestLongPathWalk's workspace: the walk's 64 MiB of
// paths, the entries it holds, and Go's garbage.
const maxWalkGrowth = 256 << 20

// 100,000 sparse files under 16 nested 250-byte directories (16 MB of the
// sandbox's disk) took the server from 50 MB to 1.85 GB on one GET /diff:
// the walk held every path (4 KB each) in its index and in its notes.
func TestLongPathWalk(t *testing.T) {
	t.Parallel()
	prog := pyDeep + `fd = os.open(d, os.O_RDONLY)
for i in range(100000):
    f = os.open("f%05d" % i, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.ftruncate(f, 16 << 20)
    os.close(f)
`
	s, id := pythonJob(t, prog, "", nil)
	before, peak, n, tail := diffMemory(t, s, id)
	if peak-before > maxWalkGrowth {
		t.Errorf("the server grew by %d MiB taking the diff, over %d MiB", (peak-before)>>20, maxWalkGrowth>>20)
	}
	if !bytes.Contains(tail, []byte("+agentbox left this file's content out: a sparse file of 16777216 bytes")) {
		t.Errorf("the diff, of %d bytes, does not end with a sparse file's note: %q", n, tail)
	}
}

// diffMemory takes job id's diff from server s and returns the server's
// resident memory before it and at its peak during it, the diff's size
// and its last 4 KiB.
func diffMemory(t *testing.T, s *server, id string) (before, peak, n int64, tail []byte) {
	t.Helper()
	pid := strconv.Itoa(s.cmd.Process.Pid)
	// Writing 5 to clear_refs resets the peak (VmHWM) to what is resident now.
	if err := os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	before = procStatus(t, pid, "VmRSS")
	req, _ := http.NewRequest("GET", s.url+"/v1/jobs/"+id+"/diff", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	w := &tailWriter{max: 4 << 10}
	n, err = io.Copy(w, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /diff: %d, %v after %d bytes: %s", resp.StatusCode, err, n, w.b)
	}
	peak = procStatus(t, pid, "VmHWM")
	t.Logf("the server's resident memory: %d MiB before the diff, %d MiB at its peak during it; the diff: %d MiB",
		before>>20, peak>>20, n>>20)
	return before, peak, n, w.b
}

// procStatus is the value in bytes of field (a kB line) of
// /proc/<pid>/status.
func procStatus(t *testing.T, pid, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%s/status has no %s", pid, field)
	return 0
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestDiffOfManyLinesInAMemoryCgroup: a sandbox writes 64 MiB of newlines
// (a text diff of it took the server's git 2.8 GB); with the server in a
// memory cgroup of 1 GiB, the diff API, the zip and the UI's Diff tab,
// asked twice each at once, all answer (the file named, not diffed), and
// nothing in the cgroup was OOM-killed.
func TestDiffOfManyLinesInAMemoryCgroup(t *testing.T) {
	t.Parallel()
	cg := newMemoryCgroup(t, 1<<30)
	fake := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "head -c 67108864 /dev/zero | tr '\\0' '\\n' > lines.txt && echo small > small.txt && wc -c lines.txt"})),
		step(llmtest.Call("finish", map[string]any{"summary": "wrote lines.txt"})),
	}})
	s := newServer(t, "AGENTBOX_AGENT=model", "AGENTBOX_CONCURRENCY=1", "ANTHROPIC_API_KEY=test-key",
		"ANTHROPIC_BASE_URL="+fake.AnthropicURL(), "AGENTBOX_MODEL=anthropic:claude-sonnet-4-5")
	s.startIn(cg)
	j := s.runJob(t, "write a file of many lines", nil)
	if j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	paths := []string{"/v1/jobs/" + j.JobID + "/diff", "/v1/jobs/" + j.JobID + "/artifacts.zip", "/ui/jobs/" + j.JobID + "/diff"}
	type answer struct {
		path string
		code int
		body []byte
		err  error
	}
	answers := make(chan answer, 2*len(paths))
	var wg sync.WaitGroup
	for range 2 {
		for _, p := range paths {
			wg.Go(func() {
				code, body, err := s.fetch(p)
				answers <- answer{p, code, body, err}
			})
		}
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.err != nil || a.code != 200 {
			t.Errorf("GET %s: %d %v: %.300s", a.path, a.code, a.err, a.body)
			continue
		}
		body := string(a.body)
		if strings.HasSuffix(a.path, ".zip") {
			if body, a.err = zipEntry(a.body, "agentbox.diff"); a.err != nil {
				t.Errorf("GET %s: %v", a.path, a.err)
				continue
			}
		}
		for _, want := range []string{"lines.txt", "small.txt"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s does not name %s: %.500s", a.path, want, body)
			}
		}
		if !strings.HasPrefix(a.path, "/ui/") && !strings.Contains(body, "Binary files /dev/null and b/lines.txt differ") {
			t.Errorf("GET %s: lines.txt diffed, not named: %.500s", a.path, body)
		}
	}
	if code, _, err := s.fetch("/healthz"); err != nil || code != 200 || s.cmd.ProcessState != nil {
		t.Errorf("server after the diffs: %d %v %v\n%s", code, err, s.cmd.ProcessState, s.logs)
	}
	if n := cg.oomKills(t); n != 0 {
		t.Errorf("%d processes of the server's cgroup were OOM-killed\n%s", n, s.logs)
	}
	t.Logf("peak memory of the server and its children: %d MiB", cg.peak(t)>>20)
}

// fetch GETs path with the token.
func (s *server) fetch(path string) (int, []byte, error) {
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// zipEntry is the content of entry name of zip b.
func zipEntry(b []byte, name string) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return "", err
	}
	rc, err := zr.Open(name)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	e, err := io.ReadAll(rc)
	return string(e), err
}

// startIn starts the server as a process of cgroup cg (its children
// too), from its first instruction: a shell joins the cgroup, then
// becomes the server.
func (s *server) startIn(cg *memoryCgroup) {
	s.t.Helper()
	s.logs = &testenv.Buffer{}
	s.cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.procs(), guestBinary, "serve"}, s.args...)...)
	s.cmd.Env, s.cmd.Stdout, s.cmd.Stderr = s.env, s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); close(exited) }()
	s.t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-exited
	})
	waitUntil(s.t, 30*time.Second, func() bool {
		code, _, err := s.fetch("/healthz")
		return err == nil && code == 200
	})
}

// memoryCgroup is a memory cgroup of the test's own, under the one this
// process is in: cgroup v2 (memory.max) or v1 (memory.limit_in_bytes).
type memoryCgroup struct {
	dir string
	v2  bool
}

// newMemoryCgroup makes a memory cgroup bounded at limit bytes, removed
// when the test ends (once its processes are gone). Without one the
// test is skipped (not root, no writable cgroup fs).
func newMemoryCgroup(t *testing.T, limit int64) *memoryCgroup {
	t.Helper()
	cg, err := findMemoryCgroup()
	if err != nil {
		t.Skipf("no memory cgroup to make one under: %v", err)
	}
	cg.dir = filepath.Join(cg.dir, fmt.Sprintf("agentbox-test-%d", os.Getpid()))
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (root and a writable cgroup fs are needed): %v", err)
	}
	t.Cleanup(func() {
		// After the server's cleanup (cleanups run last first): what it
		// left (a git still running) is killed, then the cgroup removed.
		waitUntil(t, 10*time.Second, func() bool {
			b, _ := os.ReadFile(cg.procs())
			for _, pid := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(pid); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			return os.Remove(cg.dir) == nil
		})
	})
	file, value := "memory.limit_in_bytes", strconv.FormatInt(limit, 10)
	if cg.v2 {
		file = "memory.max"
		if err := os.WriteFile(filepath.Join(cg.dir, "memory.swap.max"), []byte("0"), 0o644); err != nil {
			t.Logf("memory.swap.max: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0o644); err != nil {
		t.Fatalf("memory cgroup limit: %v", err)
	}
	return cg
}

// findMemoryCgroup is the memory cgroup this process is in.
func findMemoryCgroup() (*memoryCgroup, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "memory" {
			return &memoryCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", f[2])}, nil
		}
		if f[0] == "0" {
			dir := filepath.Join("/sys/fs/cgroup", f[2])
			if c, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil && strings.Contains(string(c), "memory") {
				return &memoryCgroup{dir: dir, v2: true}, nil
			}
		}
	}
	return nil, fmt.Errorf("no memory controller in /proc/self/cgroup:\n%s", b)
}

func (c *memoryCgroup) procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// oomKills is how many of the cgroup's processes the kernel OOM-killed.
func (c *memoryCgroup) oomKills(t *testing.T) int {
	t.Helper()
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no oom_kill in %s:\n%s", file, b)
	return 0
}

// peak is the cgroup's highest memory use.
func (c *memoryCgroup) peak(t *testing.T) int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		t.Logf("peak: %v", err)
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
)

const testToken = "test-token-0123456789"

// server is an `agentbox serve` child process.
type server struct {
	t       *testing.T
	url     string
	dataDir string
	env     []string
	args    []string // after "serve"
	cmd     *exec.Cmd
	logs    *testenv.Buffer // written by exec's copying goroutines
}

// newServer prepares a server with its own data dir, port and instance label.
// A test that works only through servers of its own is independent of the
// others and calls t.Parallel: it mostly waits on its child and sandboxes.
// Tests that set the process's environment (t.Setenv) or time a path
// (a latency, a budget in seconds, a benchmark) stay sequential; Go runs
// those before the parallel ones, never beside them.
func newServer(t *testing.T, extraEnv ...string) *server {
	t.Helper()
	testenv.DockerWithImage(t)
	data, err := os.MkdirTemp("", "abv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	// After the server is killed (cleanups run last first): a server
	// killed in the middle of creating a sandbox leaves its container
	// for a reaper that will not run again.
	t.Cleanup(func() {
		removeInstance(t, "servetest-"+filepath.Base(data))
		testenv.UnmountUnder(data)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &server{t: t, url: "http://" + addr, dataDir: data}
	s.env = append(os.Environ(), "AGENTBOX_DATA_DIR="+data, "AGENTBOX_ADDR="+addr, "AGENTBOX_TOKEN="+testToken,
		"AGENTBOX_INSTANCE=servetest-"+filepath.Base(data), "AGENTBOX_GUEST_BINARY="+guestBinary, "AGENTBOX_AGENT=shell")
	s.env = append(s.env, extraEnv...)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.logs = &testenv.Buffer{}
	s.cmd = exec.Command(guestBinary, append([]string{"serve"}, s.args...)...)
	s.cmd.Env, s.cmd.Stdout, s.cmd.Stderr = s.env, s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	waitUntil(s.t, 30*time.Second, func() bool {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

// do sends an authenticated request and decodes a JSON answer into out.
func (s *server) do(method, path string, body any, out any) int {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, r)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type jobDTO struct {
	JobID    string `json:"job_id"`
	Status   string `json:"status"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
	// Isolation is the tier the job ran under.
	Isolation string `json:"isolation"`
	Steps     int    `json:"steps"`
}

func (s *server) submit(task string) (string, int) {
	var j jobDTO
	code := s.do("POST", "/v1/jobs", map[string]any{"task": task}, &j)
	return j.JobID, code
}

func (s *server) job(id string) jobDTO {
	var j jobDTO
	s.do("GET", "/v1/jobs/"+id, nil, &j)
	return j
}

func (s *server) awaitFinal(ids []string) map[string]jobDTO {
	s.t.Helper()
	final := map[string]jobDTO{}
	waitUntil(s.t, 3*time.Minute, func() bool {
		for _, id := range ids {
			if _, ok := final[id]; ok {
				continue
			}
			if j := s.job(id); j.Status == "complete" || j.Status == "error" || j.Status == "canceled" {
				final[id] = j
			}
		}
		return len(final) == len(ids)
	})
	return final
}

// removeInstance removes every container of agentbox instance name. A
// container the server was removing itself when it stopped (the engine
// answers "already in progress" or, once done, "No such container") is
// awaited: the check is that none is left.
func removeInstance(t *testing.T, name string) {
	list := func() []string {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.agentbox.instance="+name).Output()
		if err != nil {
			t.Errorf("list the containers of %s: %v", name, err)
			return nil
		}
		return strings.Fields(string(out))
	}
	if ids := list(); len(ids) > 0 {
		out, err := exec.Command("docker", append([]string{"rm", "-f", "-v"}, ids...)...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "already in progress") && !strings.Contains(string(out), "No such container") {
			t.Errorf("remove the containers of %s: %v: %s", name, err, out)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for ids := list(); len(ids) > 0; ids = list() {
		if time.Now().After(deadline) {
			t.Errorf("containers of %s still there a minute after their removal: %v", name, ids)
			return
		}
		time.Sleep(100 * time.Millisecond) // the engine's removal has no event to await here
	}
}

func (s *server) sandboxes() int {
	s.t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.agentbox.instance=servetest-"+filepath.Base(s.dataDir)).Output()
	if err != nil {
		s.t.Fatal(err)
	}
	return len(strings.Fields(string(out))) + len(testenv.ProcessesNaming(s.dataDir, "qemu-system", "virtiofsd"))
}

func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id, code := s.submit("mkdir -p src && echo 'print(\"hi\")' > src/hello.py && python3 src/hello.py && ln -s /etc etc-link")
	if code != 201 || id == "" {
		t.Fatalf("submit: %d %q\n%s", code, id, s.logs)
	}
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	// The event log, as a JSON page, has the output.
	var page struct {
		Events []struct {
			Seq     int64           `json:"seq"`
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	s.do("GET", "/v1/jobs/"+id+"/events", nil, &page)
	var all strings.Builder
	for _, ev := range page.Events {
		all.Write(ev.Payload)
	}
	if !strings.Contains(all.String(), `"text":"hi\n"`) {
		t.Errorf("events lack the output: %s", all.String())
	}
	// The workspace as a zip, and one file.
	zipBytes := s.get(t, "/v1/jobs/"+id+"/artifacts.zip", 200)
	zr, err := zip.NewReader(bytes.NewReader(zipBytes), int64(len(zipBytes)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range zr.File {
		if f.Name == "src/hello.py" {
			found = true
		}
	}
	if !found {
		t.Errorf("zip lacks src/hello.py")
	}
	if b := s.get(t, "/v1/jobs/"+id+"/files/src/hello.py", 200); string(b) != "print(\"hi\")\n" {
		t.Errorf("file = %q", b)
	}
	for _, p := range []string{"etc-link/passwd", "../../../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "..%2F..%2Fetc%2Fpasswd"} {
		if b := s.getAny(t, "/v1/jobs/"+id+"/files/"+p); bytes.Contains(b, []byte("root:")) {
			t.Errorf("%s leaked /etc/passwd", p)
		}
	}
	if n := s.sandboxes(); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
	metrics := string(s.get(t, "/metrics", 200))
	for _, want := range []string{`agentbox_jobs{state="complete"} 1`, `agentbox_queue_depth 0`,
		`agentbox_job_duration_seconds_count{status="complete"} 1`, `agentbox_sandbox_start_seconds_count 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A second server on the same data dir is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, guestBinary, "serve", "--addr", "127.0.0.1:0")
	second.Env = s.env
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another agentbox serve") {
		t.Errorf("second server on one data dir: %v: %s", err, out)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve did not exit cleanly on SIGTERM: %v\n%s", err, s.logs)
	}
}

// viewerLinks asks for a job's one-time viewer links.
func (s *server) viewerLinks(id string) wire.ViewerLinks {
	s.t.Helper()
	var l wire.ViewerLinks
	if code := s.do("POST", "/v1/jobs/"+id+"/viewer", nil, &l); code != http.StatusOK {
		s.t.Fatalf("viewer links of %s: %d", id, code)
	}
	return l
}

func (s *server) get(t *testing.T, path string, want int) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	return b
}

func (s *server) getAny(t *testing.T, path string) []byte {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 400 {
		t.Errorf("GET %s: %d, want a 4xx", path, resp.StatusCode)
	}
	return b
}

func TestServeSurvivesKill9(t *testing.T) {
	t.Parallel()
	s := newServer(t, "AGENTBOX_CONCURRENCY=2", "AGENTBOX_LEASE=5s")
	s.start()
	var mu sync.Mutex
	var accepted []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keep submitting across the crash
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id, code := s.submit(fmt.Sprintf("sleep 1; echo job %d > out.txt", i))
			if code >= 200 && code < 300 {
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
			if i >= 5 && code == 0 {
				return // the server is down
			}
			time.Sleep(25 * time.Millisecond) // paced: every accepted job must then run, two at a time
		}
	}()
	waitUntil(t, time.Minute, func() bool { // two running, more queued
		var page struct {
			Jobs []jobDTO `json:"jobs"`
		}
		s.do("GET", "/v1/jobs?status=running", nil, &page)
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		return len(page.Jobs) >= 2 && n >= 6
	})
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	close(stop)
	wg.Wait()

	s.start()
	mu.Lock()
	ids := append([]string(nil), accepted...)
	mu.Unlock()
	final := s.awaitFinal(ids)
	takenOver := 0
	for id, j := range final {
		if j.Status != "complete" {
			t.Errorf("job %s ended %s: %s", id, j.Status, j.Error)
		}
		if j.Attempts > 1 {
			takenOver++
		}
	}
	if takenOver == 0 {
		t.Errorf("no job was run again after the kill, yet %d were running", 2)
	}
	var page struct {
		Jobs []jobDTO `json:"jobs"`
	}
	s.do("GET", "/v1/jobs?limit=1000", nil, &page)
	seen := map[string]int{}
	for _, j := range page.Jobs {
		seen[j.JobID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("accepted job %s listed %d times", id, seen[id])
		}
	}
	waitUntil(t, time.Minute, func() bool { return s.sandboxes() == 0 })
	t.Logf("%d jobs accepted across the crash, all complete, %d run again", len(ids), takenOver)
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met within %v", d)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestServePublicURL: behind a proxy, links and viewer links use the
// public URL; a public URL with a path is refused at start.
func TestServePublicURL(t *testing.T) {
	t.Parallel()
	const public = "https://agentbox.example.com"
	s := newServer(t, "AGENTBOX_PUBLIC_URL="+public, "AGENTBOX_CONCURRENCY=0")
	s.start()
	id, code := s.submit("true")
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	links := s.viewerLinks(id)
	if !strings.HasPrefix(links.DesktopURL, public+"/v1/jobs/"+id+"/desktop/?ticket=") {
		t.Errorf("viewer link %q does not use the public URL", links.DesktopURL)
	}
	if _, _, err := run(context.Background(), "serve", "--public-url", "https://example.com/sub", "--data-dir", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "without a path") {
		t.Errorf("a public URL with a path: %v", err)
	}
	for _, args := range [][]string{
		{"--view-url", "https://view.example.com"},
		{"--view-url", "https://{job}.view.example.com", "--no-auth"},
		{"--view-url", "https://{job}.example.com", "--public-url", "https://agentbox.example.com"},
	} {
		args = append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)
		// Refused before serving; were it not, the deadline ends the server.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, _, err := run(ctx, args...); err == nil || !strings.Contains(err.Error(), "view URL") {
			t.Errorf("%v: %v, want a view URL error", args, err)
		}
		cancel()
	}
}

// TestServeViewerCookieSurvivesRestart: the viewer key is kept in the data
// dir, so a browser's viewer cookie still opens the job's views after serve
// restarts; a ticket issued before the restart does not.
func TestServeViewerCookieSurvivesRestart(t *testing.T) {
	t.Parallel()
	s := newServer(t, "AGENTBOX_CONCURRENCY=0") // the job stays pending: no sandbox needed
	s.start()
	id, code := s.submit("true")
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, cookie string) *http.Response {
		req, _ := http.NewRequest("GET", s.url+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := get(s.viewerLinks(id).DesktopURL, "")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("ticket: %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	unused := s.viewerLinks(id).DesktopURL
	fi, err := os.Stat(filepath.Join(s.dataDir, "viewer.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("viewer key: %v %v, want mode 0600", fi, err)
	}

	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve did not exit cleanly: %v\n%s", err, s.logs)
	}
	s.start()
	// The cookie passes auth: the pending job has no sandbox yet (409), not 401.
	if resp := get("/v1/jobs/"+id+"/desktop/", cookie); resp.StatusCode != http.StatusConflict {
		t.Errorf("cookie after restart: %d, want 409 (authenticated, no sandbox)", resp.StatusCode)
	}
	if resp := get(unused, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("ticket issued before the restart: %d, want 401", resp.StatusCode)
	}
}

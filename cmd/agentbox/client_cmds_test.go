package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// runClient runs the CLI in-process with stdin, as main does.
func runClient(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	root := newRootCmd()
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return o.String(), e.String(), err
}

// clientEnv starts a test server and points the CLI at it.
func clientEnv(t *testing.T) *apitest.Env {
	e := apitest.New(t, api.Config{})
	t.Setenv("AGENTBOX_URL", e.URL)
	t.Setenv("AGENTBOX_TOKEN", apitest.Token)
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	return e
}

func mustRun(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := runClient(context.Background(), "", args...)
	if err != nil {
		t.Fatalf("agentbox %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out, errOut
}

func TestSubmitStatusListCancel(t *testing.T) {
	e := clientEnv(t)
	out, _ := mustRun(t, "submit", "--timeout", "20m", "--memory", "1g", "--cpus", "2", "--max-steps", "9", "--disk", "3g",
		"--meta", "ticket=OPS-1", "--model", "openai:gpt", "build it")
	id := strings.TrimSpace(out)
	j, err := e.Svc.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("submitted %q: %v", out, err)
	}
	want := store.Limits{Timeout: 20 * 60e9, MaxSteps: 9, MemoryBytes: 1 << 30, NanoCPUs: 2e9, DiskBytes: 3 << 30}
	if j.Task != "build it" || j.Model != "openai:gpt" || j.Limits != want || j.Metadata["ticket"] != "OPS-1" {
		t.Errorf("job = %+v", j)
	}
	out, _ = mustRun(t, "status", id)
	for _, s := range []string{id, "pending", "build it", "0 of 3"} {
		if !strings.Contains(out, s) {
			t.Errorf("status lacks %q:\n%s", s, out)
		}
	}
	out, _ = mustRun(t, "status", "--json", id)
	var jj wire.Job
	if err := json.Unmarshal([]byte(out), &jj); err != nil || jj.JobID != id {
		t.Errorf("status --json: %v\n%s", err, out)
	}
	out, _ = mustRun(t, "list")
	if !strings.Contains(out, id) || !strings.Contains(out, "STATUS") {
		t.Errorf("list:\n%s", out)
	}
	if out, _ = mustRun(t, "list", "--status", "running"); strings.Contains(out, id) {
		t.Errorf("list --status running shows a pending job:\n%s", out)
	}
	out, _ = mustRun(t, "cancel", id)
	if !strings.Contains(out, id+" canceled") {
		t.Errorf("cancel: %s", out)
	}
	_, _, err = runClient(context.Background(), "", "cancel", id)
	if err == nil || !strings.Contains(err.Error(), "already ended") {
		t.Errorf("second cancel: %v", err)
	}
}

func TestSubmitFromStdinAsJSON(t *testing.T) {
	e := clientEnv(t)
	out, _, err := runClient(context.Background(), "task from stdin\n", "submit", "--json", "--idempotency-key", "k", "-")
	if err != nil {
		t.Fatal(err)
	}
	var sr wire.SubmitResponse
	if err := json.Unmarshal([]byte(out), &sr); err != nil || sr.Status != "pending" {
		t.Fatalf("submit --json: %v %s", err, out)
	}
	if j, _ := e.Svc.Get(context.Background(), sr.JobID); j.Task != "task from stdin\n" || j.IdempotencyKey != "k" {
		t.Errorf("job = %+v", j)
	}
}

func TestClientBadInput(t *testing.T) {
	clientEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--timeout", "soon", "x"}, "--timeout"},
		{[]string{"submit", "--memory", "lots", "x"}, "--memory"},
		{[]string{"submit", "--meta", "novalue", "x"}, "KEY=VALUE"},
		{[]string{"submit", "--cpus", "-1", "x"}, "--cpus"},
		{[]string{"submit", "--timeout", "48h", "x"}, "timeout"},
		{[]string{"submit"}, "agentbox submit takes TASK; got none"},
		{[]string{"status", "job_nope"}, "no job job_nope on http://127.0.0.1:"},
		{[]string{"list", "--status", "done"}, "status"},
		{[]string{"logs", "job_nope"}, "no job job_nope on"},
		{[]string{"download", "job_nope"}, "no job job_nope on"},
		{[]string{"status", "--url", "localhost:1", "x"}, "http://host:port"},
	} {
		_, _, err := runClient(context.Background(), "", tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tt.args, err, tt.want)
		}
	}
}

// progressOnFollow moves the job along once a client starts following it,
// as a worker would.
func progressOnFollow(t *testing.T, e *apitest.Env, final store.Status) *sync.WaitGroup {
	var once sync.Once
	var wg sync.WaitGroup
	e.OnRequest(func(r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			return
		}
		id := strings.Split(r.URL.Path, "/")[3]
		once.Do(func() {
			wg.Go(func() {
				e.Start(id)
				e.Emit(id, event.Command{Command: "echo hello"})
				e.Emit(id, event.Output{Stream: "stdout", Text: "hello\n"})
				e.Emit(id, event.Exit{ExitCode: 0, DurationMS: 12})
				e.Finish(id, final, map[store.Status]string{store.StatusError: "it broke"}[final])
			})
		})
	})
	t.Cleanup(wg.Wait)
	return &wg
}

func TestSubmitFollow(t *testing.T) {
	e := clientEnv(t)
	progressOnFollow(t, e, store.StatusComplete)
	out, errOut := mustRun(t, "submit", "--follow", "say hello")
	if out != "hello\n" {
		t.Errorf("stdout = %q, want the command's output only", out)
	}
	for _, s := range []string{"submitted job_", "[pending]", "[running] attempt 1", "$ echo hello", "[exit 0 after 12ms]", "[complete]"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut)
		}
	}
}

func TestLogsExitCode(t *testing.T) {
	e := clientEnv(t)
	progressOnFollow(t, e, store.StatusError)
	id := e.Submit("fail").ID
	out, errOut, err := runClient(context.Background(), "", "logs", id)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("logs of a failed job: err = %v", err)
	}
	if out != "hello\n" || !strings.Contains(errOut, "[error] it broke") || !strings.Contains(errOut, "ended error: it broke") {
		t.Errorf("stdout %q\nstderr %s", out, errOut)
	}
	out, _, err = runClient(context.Background(), "", "logs", "--json", "--no-follow", id)
	if !errors.As(err, &ee) {
		t.Errorf("logs --json of a failed job: err = %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last wire.Event
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) != 6 || last.Type != "state" {
		t.Errorf("logs --json: %v\n%s", err, out)
	}
}

func TestLogsNoFollow(t *testing.T) {
	e := clientEnv(t)
	done := e.Submit("ok").ID
	e.Emit(done, event.Output{Stream: "stdout", Text: "42\n"})
	e.Finish(done, store.StatusComplete, "")
	if out, _ := mustRun(t, "logs", "--no-follow", done); out != "42\n" {
		t.Errorf("stdout = %q", out)
	}
	running := e.Submit("still going").ID
	e.Start(running)
	_, errOut, err := runClient(context.Background(), "", "logs", "--no-follow", running)
	if err == nil || !strings.Contains(errOut, "is running, not ended") {
		t.Errorf("logs --no-follow of a running job: %v %s", err, errOut)
	}
}

func TestDownload(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "src/hello.txt", "hello")
	t.Chdir(t.TempDir())
	_, errOut := mustRun(t, "download", id)
	if b, err := os.ReadFile(id + ".zip"); err != nil || !bytes.HasPrefix(b, []byte("PK")) || !strings.Contains(errOut, "to "+id+".zip") {
		t.Fatalf("download: %v %s", err, errOut)
	}
	_, _, err := runClient(context.Background(), "", "download", id)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("overwrite without --force: %v", err)
	}
	mustRun(t, "download", "--force", id)
	mustRun(t, "download", "-o", "out.zip", id)
	if out, _ := mustRun(t, "download", "--file", "src/hello.txt", "-o", "-", id); out != "hello" {
		t.Errorf("--file -o -: %q", out)
	}
	mustRun(t, "download", "--file", "src/hello.txt", id)
	if b, _ := os.ReadFile("hello.txt"); string(b) != "hello" {
		t.Errorf("hello.txt = %q", b)
	}
	running := e.Submit("y").ID
	e.Start(running)
	_, _, err = runClient(context.Background(), "", "download", running)
	if err == nil || !strings.Contains(err.Error(), "running") {
		t.Errorf("download of a running job: %v", err)
	}
	if entries, _ := os.ReadDir("."); len(entries) != 3 {
		t.Errorf("left behind: %v (want the two zips and hello.txt)", entries)
	}
}

func TestClientToken(t *testing.T) {
	e := clientEnv(t)
	t.Setenv("AGENTBOX_TOKEN", "")
	_, _, err := runClient(context.Background(), "", "list")
	if err == nil || !strings.Contains(err.Error(), "--token or AGENTBOX_TOKEN") {
		t.Errorf("no token: %v", err)
	}
	mustRun(t, "list", "--token", apitest.Token)
	dir := t.TempDir()
	t.Setenv("AGENTBOX_DATA_DIR", dir)
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(apitest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "list")
	_ = e
}

func TestClientUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	_, _, err = runClient(context.Background(), "", "status", "--url", url, "job_x")
	if err == nil || !strings.Contains(err.Error(), "is agentbox serve running at "+url) {
		t.Errorf("err = %v", err)
	}
}

func TestClientCommandsExplainThemselves(t *testing.T) {
	for _, c := range newClientCmds(&app{}) {
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s lacks Short, Long or Example", c.Name())
		}
		for _, f := range []string{"url", "token"} {
			if c.Flags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", c.Name(), f)
			}
		}
	}
}

// TestSubmitImage: --image reaches the server, which stores it normalized
// and shows it in the job's status, or refuses it naming the images allowed.
func TestSubmitImage(t *testing.T) {
	e := clientEnv(t)
	e.Configure(func(c *jobs.ServiceConfig) { c.Images = []string{config.DefaultImage, "python-ml:latest"} })
	out, _ := mustRun(t, "submit", "--image", "python-ml", "train it")
	id := strings.TrimSpace(out)
	if j, err := e.Svc.Get(context.Background(), id); err != nil || j.Image != "python-ml:latest" {
		t.Fatalf("job %+v, %v", j, err)
	}
	if out, _ = mustRun(t, "status", id); !strings.Contains(out, "image:") || !strings.Contains(out, "python-ml:latest") {
		t.Errorf("status lacks the image:\n%s", out)
	}
	_, _, err := runClient(context.Background(), "", "submit", "--image", "ubuntu", "x")
	if err == nil || !strings.Contains(err.Error(), "allowed images: "+config.DefaultImage+", python-ml:latest") {
		t.Errorf("submit --image ubuntu: %v", err)
	}
}

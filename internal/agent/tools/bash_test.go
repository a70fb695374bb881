package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

func TestBash(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	cases := []struct {
		name    string
		command string
		isError bool
		want    []string
		never   []string
	}{
		{"stdout", "echo hello", false, []string{"exit code: 0", "<stdout>\nhello\n</stdout>"}, []string{"<stderr>"}},
		{"exit code and stderr", "echo out; echo oops >&2; exit 3", true,
			[]string{"exit code: 3 (failure)", "<stdout>\nout\n</stdout>", "<stderr>\noops\n</stderr>"}, nil},
		{"not found", "no-such-command-xyz", true, []string{"exit code: 127", "no-such-command-xyz: command not found"}, nil},
		{"workspace is cwd", "pwd; whoami", false, []string{"/workspace\nagent\n"}, nil},
		{"no output", "true", false, []string{"(no output)"}, nil},
		{"files persist", "cd " + dir + " && echo data > f.txt && cd / && cat /workspace/" + dir + "/f.txt", false, []string{"data"}, nil},
		{"killed by signal", "kill -9 $$", true, []string{"exit code: 137", "SIGKILL"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, env, tools.BashTool{}, obj{"command": c.command})
			wantText(t, res, c.isError, c.want...)
			wantNot(t, res, c.never...)
		})
	}
}

func TestBashTimeout(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	start := time.Now()
	res := call(t, env, tools.BashTool{}, obj{"command": "echo started; sleep 60", "timeout_seconds": 1})
	wantText(t, res, true, "timed out after 1s and was killed", "started")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s", d)
	}
	// Env.Timeout is the default when the call names none.
	short := *env
	short.Timeout = time.Second
	res = call(t, &short, tools.BashTool{}, obj{"command": "sleep 60"})
	wantText(t, res, true, "timed out after 1s")
}

func TestBashTruncates(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	small := *env
	small.MaxOutput = 3000
	res := call(t, &small, tools.BashTool{}, obj{"command": "seq 1 100000; echo tail-marker >&2"})
	wantText(t, res, false, "output truncated", "bytes omitted", "<stdout>\n1\n2\n", "100000\n</stdout>", "tail-marker")
	if len(res.Text) > 3000 {
		t.Errorf("text is %d bytes, over MaxOutput 3000", len(res.Text))
	}
}

// TestBashBackgroundServer: a server started in the background by one call
// keeps running and answers the next call.
func TestBashBackgroundServer(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, "echo hi > "+dir+"/hello.txt")
	start := time.Now()
	res := call(t, env, tools.BashTool{}, obj{"command": "cd " + dir + "; python3 -m http.server 8000 > server.log 2>&1 & echo $! > server.pid"})
	wantText(t, res, false, "exit code: 0")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("starting a background server took %s; it must return at once", d)
	}
	t.Cleanup(func() { // stop the server and await its end, freeing the port
		sh(t, env, "pid=$(cat "+dir+"/server.pid); kill $pid; while kill -0 $pid 2>/dev/null; do sleep 0.05; done")
	})
	// Wait for the server to listen, then ask it; the loop awaits a condition.
	res = call(t, env, tools.BashTool{}, obj{"command": "for i in $(seq 300); do curl -sf localhost:8000/ && exit 0; sleep 0.1; done; cat " + dir + "/server.log; exit 1"})
	wantText(t, res, false, "hello.txt")
	res = call(t, env, tools.BashTool{}, obj{"command": "curl -s localhost:8000/hello.txt"})
	wantText(t, res, false, "<stdout>\nhi\n")
	if log := sh(t, env, "cat "+dir+"/server.log"); !strings.Contains(log, "GET /hello.txt") {
		t.Errorf("server.log lacks the request:\n%s", log)
	}
}

// TestBashCanceled: a call whose ctx ends is a Go error (the job is being
// stopped), and the command is killed.
func TestBashCanceled(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := tools.BashTool{}.Run(ctx, env, raw(t, obj{"command": "echo $$ > " + dir + "/pid; sleep 60"}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's error", err)
	}
	// The guest kills the command when its caller goes away; await that.
	res := call(t, env, tools.BashTool{}, obj{"command": "for i in $(seq 300); do kill -0 $(cat " + dir + "/pid) 2>/dev/null || exit 0; sleep 0.1; done; exit 1"})
	wantText(t, res, false)
}

// TestBashSpillsLargeOutput: output too large to show is saved whole in the
// workspace, and the model is told where.
func TestBashSpillsLargeOutput(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	spill := *env
	spill.MaxOutput, spill.SpillDir = 3000, dir+"/spill"
	res := call(t, &spill, tools.BashTool{}, obj{"command": "seq 1 100000"})
	wantText(t, res, false, "output shortened", "/workspace/"+dir+"/spill/", "read_file")
	if len(res.Text) > 3000 {
		t.Errorf("text is %d bytes, over MaxOutput 3000", len(res.Text))
	}
	saved := sh(t, env, "cat "+dir+"/spill/*.txt | grep -c .")
	if !strings.Contains(saved, "<stdout>\n100002\n") { // every line, plus the two section tags
		t.Errorf("the spill file does not hold the whole output: %s", saved)
	}
}

package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
	"github.com/agentbox/agentbox/internal/guest/daemon/daemontest"
)

// start serves a guest on a fresh unix socket over a fresh workspace.
func start(t testing.TB, mod ...func(*daemon.Config)) (*guest.Client, string) {
	t.Helper()
	ws := t.TempDir()
	sockDir, err := os.MkdirTemp("", "abg") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cfg := daemon.Config{Workspace: ws, Version: "test"}
	for _, m := range mod {
		m(&cfg)
	}
	sock := filepath.Join(sockDir, guest.SocketName)
	daemontest.ServeUnix(t, sock, cfg)
	c := guest.NewClient(sock)
	t.Cleanup(c.Close)
	return c, ws
}

func sh(t *testing.T, c *guest.Client, line string) guest.ExecResult {
	t.Helper()
	res, err := c.Exec(context.Background(), guest.Shell(line))
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return res
}

func TestHandshake(t *testing.T) {
	c, ws := start(t)
	h, err := c.Handshake(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Protocol != guest.ProtocolVersion || h.Workspace != ws || h.UID != os.Getuid() {
		t.Errorf("health = %+v", h)
	}
}

func TestExec(t *testing.T) {
	c, ws := start(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		req        guest.ExecRequest
		stdout     string
		stderr     string
		code       int
		signal     string
		startError bool
	}{
		{name: "stdout", req: guest.Shell("echo hello"), stdout: "hello\n"},
		{name: "stderr and exit code", req: guest.Shell("echo oops >&2; exit 3"), stderr: "oops\n", code: 3},
		{name: "stdin", req: guest.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("fed\n")}, stdout: "fed\n"},
		{name: "no stdin reads eof", req: guest.ExecRequest{Cmd: []string{"cat"}}},
		{name: "env", req: guest.ExecRequest{Cmd: []string{"sh", "-c", "echo $GREETING"}, Env: map[string]string{"GREETING": "hi"}}, stdout: "hi\n"},
		{name: "relative cwd", req: guest.ExecRequest{Cmd: []string{"pwd"}, Cwd: "sub"}, stdout: filepath.Join(ws, "sub") + "\n"},
		{name: "default cwd is workspace", req: guest.ExecRequest{Cmd: []string{"pwd"}}, stdout: ws + "\n"},
		{name: "signal", req: guest.Shell("kill -TERM $$"), code: 128 + 15, signal: "SIGTERM"},
		{name: "not found", req: guest.ExecRequest{Cmd: []string{"no-such-command-xyz"}}, code: 127, startError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.Exec(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tt.stdout || res.ExitCode != tt.code || res.Signal != tt.signal {
				t.Errorf("got stdout %q code %d signal %q, want %q %d %q", res.Stdout, res.ExitCode, res.Signal, tt.stdout, tt.code, tt.signal)
			}
			if !tt.startError && string(res.Stderr) != tt.stderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tt.stderr)
			}
			if (res.StartError != "") != tt.startError {
				t.Errorf("start error = %q", res.StartError)
			}
		})
	}
}

func TestExecBadRequests(t *testing.T) {
	c, _ := start(t)
	for name, req := range map[string]guest.ExecRequest{
		"empty cmd":   {},
		"missing cwd": {Cmd: []string{"true"}, Cwd: "nope"},
		"bad env":     {Cmd: []string{"true"}, Env: map[string]string{"A=B": "c"}},
		"negative":    {Cmd: []string{"true"}, TimeoutMS: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.Exec(context.Background(), req); !errors.Is(err, guest.ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
		})
	}
}

func TestExecBinaryOutputIsByteExact(t *testing.T) {
	c, _ := start(t)
	in := make([]byte, 300_000)
	for i := range in {
		in[i] = byte(i*7 + i/256)
	}
	res, err := c.Exec(context.Background(), guest.ExecRequest{Cmd: []string{"sh", "-c", "cat; cat /dev/stdin >&2"}, Stdin: in})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Stdout, in) || res.Truncated {
		t.Fatalf("stdout differs: %d bytes back, want %d", len(res.Stdout), len(in))
	}
}

func TestExecCapsOutputKeepingHeadAndTail(t *testing.T) {
	c, _ := start(t)
	req := guest.Shell("echo FIRST; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo LAST")
	req.MaxOutput = 1000
	res, err := c.Exec(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !res.Truncated || res.StdoutBytes != int64(5000000+len("FIRST\n\nLAST\n")) {
		t.Errorf("truncated %v, bytes %d", res.Truncated, res.StdoutBytes)
	}
	if !strings.HasPrefix(out, "FIRST\n") || !strings.HasSuffix(out, "LAST\n") || !strings.Contains(out, "bytes of output omitted") {
		t.Errorf("want head, marker and tail, got %d bytes: %.80q...", len(out), out)
	}
	if len(out) > 1200 {
		t.Errorf("kept %d bytes, cap is 1000", len(out))
	}
}

func TestExecTimeoutKillsWholeTree(t *testing.T) {
	c, ws := start(t)
	req := guest.Shell("sleep 300 & echo $! > pids; setsid sleep 300 & echo $! >> pids; wait")
	req.TimeoutMS = 500
	begin := time.Now()
	res, err := c.Exec(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("timed out %v, code %d", res.TimedOut, res.ExitCode)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("returned after %v", d)
	}
	for _, pid := range readPids(t, filepath.Join(ws, "pids")) {
		waitGone(t, pid)
	}
}

func TestExecCancelKillsCommand(t *testing.T) {
	c, ws := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, guest.Shell("echo $$ > pid; sleep 300"))
		done <- err
	}()
	pidFile := filepath.Join(ws, "pid")
	waitFor(t, func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 0 && b[len(b)-1] == '\n' })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	waitGone(t, readPids(t, pidFile)[0])
}

func TestExecBackgroundChildDoesNotBlock(t *testing.T) {
	c, _ := start(t)
	begin := time.Now()
	res := sh(t, c, "sleep 300 & echo $!")
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("exec waited %v for a background child", d)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("background child %d died with its parent: %v", pid, err)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func TestExecStreamDeliversOutputAsProduced(t *testing.T) {
	c, ws := start(t)
	// The command prints "one", then waits for the test to react to it: if
	// output were delivered only at exit, this would never finish.
	req := guest.Shell("echo one; while [ ! -e go ]; do sleep 0.01; done; echo two >&2; exit 4")
	req.TimeoutMS = 20000
	var got []string
	res, err := c.ExecStream(context.Background(), req, func(stream string, p []byte) {
		got = append(got, stream+":"+string(p))
		if string(p) == "one\n" {
			os.WriteFile(filepath.Join(ws, "go"), nil, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.ExitCode != 4 || res.StdoutBytes != 4 || res.StderrBytes != 4 {
		t.Errorf("result %+v", res)
	}
	if strings.Join(got, "|") != "stdout:one\n|stderr:two\n" {
		t.Errorf("chunks %q", got)
	}
}

func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	return pids
}

// waitGone waits until pid no longer runs (gone or a zombie awaiting its reaper).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && len(b) > i+2 && b[i+2] == 'Z'
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExecStreamCapsOutput(t *testing.T) {
	c, _ := start(t)
	req := guest.Shell("head -c 100000 /dev/zero | tr '\\0' y")
	req.MaxOutput = 1000
	var got []byte
	res, err := c.ExecStream(context.Background(), req, func(_ string, p []byte) { got = append(got, p...) })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.StdoutBytes != 100000 {
		t.Errorf("result %+v", res)
	}
	if !bytes.HasPrefix(got, bytes.Repeat([]byte("y"), 1000)) || !bytes.Contains(got, []byte("output capped at 1000 bytes")) || len(got) > 1200 {
		t.Errorf("streamed %d bytes: %.60q…", len(got), got[min(len(got), 990):])
	}
}

// TestExecWatchCapturesLikeExec: ExecWatch streams the output up to the
// cap and returns the result Exec would, the head and the tail of each
// stream included; a call cut by its context returns the output streamed
// until then with its error.
func TestExecWatchCapturesLikeExec(t *testing.T) {
	c, ws := start(t)
	req := guest.Shell("seq 1 20000; echo oops >&2; echo END")
	req.MaxOutput = 1000
	plain, err := c.Exec(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	res, err := c.ExecWatch(context.Background(), req, func(_ string, p []byte) { got = append(got, p...) })
	if err != nil {
		t.Fatal(err)
	}
	res.DurationMS, plain.DurationMS = 0, 0
	if !reflect.DeepEqual(res, plain) {
		t.Errorf("ExecWatch's result differs from Exec's:\n%+v\n%+v", res, plain)
	}
	if !bytes.HasSuffix(res.Stdout, []byte("20000\nEND\n")) || !bytes.Contains(got, []byte("output capped at 1000 bytes")) {
		t.Errorf("stdout %.40q…, streamed %d bytes", res.Stdout, len(got))
	}

	ctx, cancel := context.WithCancel(context.Background())
	req = guest.Shell("echo started; echo warn >&2; while [ ! -e stop ]; do sleep 0.01; done; sleep 60")
	seen := 0
	res, err = c.ExecWatch(ctx, req, func(_ string, p []byte) {
		if seen++; seen == 2 { // both lines are in
			os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644)
			cancel()
		}
	})
	if err == nil || string(res.Stdout) != "started\n" || string(res.Stderr) != "warn\n" {
		t.Errorf("a canceled ExecWatch: err %v, result %+v", err, res)
	}
}

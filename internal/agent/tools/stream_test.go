package tools_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

// watched records what Env.Output is given, and when.
type watched struct {
	mu     sync.Mutex
	chunks []string
	first  time.Time
}

func (w *watched) output(stream string, p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		w.first = time.Now()
	}
	w.chunks = append(w.chunks, stream+":"+string(p))
}

func (w *watched) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.chunks, "")
}

// TestBashStreamsOutput: with Env.Output set, a command's output reaches
// it while the command runs, and the result the model sees is the same
// text as without (the same head and tail cut of a long output); the
// live output stops at the capture's cap.
func TestBashStreamsOutput(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	small := *env
	small.MaxOutput = 3000
	const command = "echo first; echo oops >&2; seq 1 50000; echo tail-marker >&2"
	plain := call(t, &small, tools.BashTool{}, obj{"command": command})
	var w watched
	streamed := small
	streamed.Output = w.output
	res := call(t, &streamed, tools.BashTool{}, obj{"command": command})
	if res.Text != plain.Text || res.IsError != plain.IsError {
		t.Errorf("the streamed call's result differs:\n%s\nwant\n%s", res.Text, plain.Text)
	}
	got := w.text()
	// Live output stops at the capture's cap, saying so.
	for _, want := range []string{"stdout:first\n", "stderr:oops\n", "\n2\n3\n", "output capped at 3000 bytes", "tail-marker"} {
		if !strings.Contains(got, want) {
			t.Errorf("the output given to Env.Output lacks %q", want)
		}
	}

	// The first line arrives while the command still runs.
	w = watched{}
	start := time.Now()
	res = call(t, &streamed, tools.BashTool{}, obj{"command": "echo early; sleep 2; echo late"})
	end := time.Now()
	wantText(t, res, false, "<stdout>\nearly\nlate\n</stdout>")
	if w.first.IsZero() || end.Sub(w.first) < time.Second {
		t.Errorf("the first output came %v after the start and %v before the end; want it at once", w.first.Sub(start), end.Sub(w.first))
	}
}

// TestBashCutKeepsOutput: a command cut by the end of its step's context
// (a job's timeout, a cancel) leaves the output it had in the result, with
// why in one plain line and no words of the transport.
func TestBashCutKeepsOutput(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	var w watched
	streamed := *env
	streamed.Output = w.output
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		why  string
	}{
		{"job timeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(context.Background(), 1500*time.Millisecond, errors.New("job timed out after 1.5s"))
		}, "not completed: job timed out after 1.5s"},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(1500*time.Millisecond, cancel)
			return ctx, cancel
		}, "not completed: canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			res, err := tools.BashTool{}.Run(ctx, &streamed, raw(t, obj{"command": "echo start; echo warn >&2; sleep 30"}))
			if err == nil {
				t.Fatal("a cut call returned no error")
			}
			wantText(t, res, true, tc.why, "<stdout>\nstart\n</stdout>", "<stderr>\nwarn\n</stderr>")
			wantNot(t, res, "guest", "POST", "/exec")
		})
	}
}

// TestRunCodeStreamsOutput: run_code's program streams its output to
// Env.Output too, and its result is as without.
func TestRunCodeStreamsOutput(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	var w watched
	streamed := *env
	streamed.Output = w.output
	res := call(t, &streamed, tools.RunCodeTool{}, obj{"language": "python", "code": "import sys\nprint('out')\nprint('warn', file=sys.stderr)"})
	wantText(t, res, false, "exit code: 0", "<stdout>\nout\n</stdout>", "<stderr>\nwarn\n</stderr>")
	w.mu.Lock()
	defer w.mu.Unlock()
	byStream := map[string]string{}
	for _, c := range w.chunks {
		stream, text, _ := strings.Cut(c, ":")
		byStream[stream] += text
	}
	if byStream["stdout"] != "out\n" || byStream["stderr"] != "warn\n" {
		t.Errorf("Env.Output was given %q", byStream)
	}
}

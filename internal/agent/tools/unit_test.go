package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/guest"
)

func TestTruncate(t *testing.T) {
	lines := strings.Repeat("0123456789abcdefghij\n", 500)
	cases := []struct {
		name string
		text string
		max  int
	}{
		{"fits", "short", 100},
		{"exact", strings.Repeat("x", 100), 100},
		{"lines", lines, 1000},
		{"one long line", strings.Repeat("y", 10000), 500},
		{"multibyte", strings.Repeat("é日本", 3000), 777},
		{"tiny max", strings.Repeat("z", 1000), 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Truncate(c.text, c.max)
			if len(got) > c.max && len(c.text) > c.max {
				t.Errorf("len = %d, over %d", len(got), c.max)
			}
			if !utf8.ValidString(got) {
				t.Errorf("invalid UTF-8: %q", got)
			}
			if len(c.text) <= c.max && got != c.text {
				t.Errorf("text that fits was changed")
			}
			if len(c.text) > c.max && c.max >= 100 && !strings.Contains(got, "bytes omitted") {
				t.Errorf("no marker: %q", got)
			}
		})
	}
	got := Truncate(lines, 1000)
	if !strings.HasPrefix(got, "0123456789") || !strings.HasSuffix(got, "abcdefghij\n") {
		t.Errorf("want whole lines at both ends: %q", got)
	}
}

func TestExecText(t *testing.T) {
	cases := []struct {
		name  string
		res   guest.ExecResult
		want  []string
		never []string
	}{
		{"ok", guest.ExecResult{Stdout: []byte("hi\n")}, []string{"exit code: 0 (success)", "<stdout>\nhi\n</stdout>"}, []string{"<stderr>"}},
		{"silent", guest.ExecResult{}, []string{"(no output)"}, nil},
		{"failure", guest.ExecResult{ExitCode: 2, Stderr: []byte("bad")}, []string{"exit code: 2 (failure)", "<stderr>\nbad\n</stderr>"}, nil},
		{"timeout", guest.ExecResult{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, []string{"killed by SIGKILL", "timed out after 3s and was killed"}, nil},
		{"oom", guest.ExecResult{ExitCode: 137, Signal: "SIGKILL", OOMKilled: true}, []string{"killed: out of memory"}, nil},
		{"guest cut", guest.ExecResult{Stdout: []byte("a"), Truncated: true, StdoutBytes: 5 << 20}, []string{"output truncated: stdout was 5242880 bytes"}, nil},
		{"start error", guest.ExecResult{ExitCode: 127, StartError: "no such file"}, []string{"command not found", "could not start: no such file"}, nil},
		{"disk full", guest.ExecResult{ExitCode: 1, Stderr: []byte("dd: error writing 'big': No space left on device")}, []string{"disk quota is full", "du -sh"}, nil},
		{"file too large", guest.ExecResult{ExitCode: 153, Signal: "SIGXFSZ"}, []string{"disk quota is full"}, nil},
		{"space mentioned, success", guest.ExecResult{Stdout: []byte("No space left on device")}, nil, []string{"disk quota is full"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := execText(c.res, 3*time.Second, 10000)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range c.never {
				if strings.Contains(got, w) {
					t.Errorf("has %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestExecTextShare: a flood on stdout must not push a short stderr out.
func TestExecTextShare(t *testing.T) {
	res := guest.ExecResult{ExitCode: 1, Stdout: []byte(strings.Repeat("out\n", 10000)), Stderr: []byte("the real error\n")}
	got := execText(res, time.Second, 2000)
	if len(got) > 2000 || !strings.Contains(got, "the real error") || !strings.Contains(got, "output truncated") {
		t.Errorf("len %d:\n%s", len(got), got)
	}
}

func TestNormalizeSpace(t *testing.T) {
	got, pos := normalizeSpace("  def f(x):\n\t\treturn  x\n")
	if got != "def f(x): return x" {
		t.Errorf("got %q", got)
	}
	if len(pos) != len(got) || pos[0] != 2 {
		t.Errorf("pos = %v", pos)
	}
}

func TestLineNumbers(t *testing.T) {
	content := "a\nx\nb\nx\n\nx"
	offs := occurrences(content, "x")
	if got := lineNumbers(content, offs); len(got) != 3 || got[0] != 2 || got[1] != 4 || got[2] != 6 {
		t.Errorf("lines = %v", got)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 20: "5.0 MiB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSchemaDecode(t *testing.T) {
	type in struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		Max       int    `json:"max"`
	}
	s := object([]string{"path"}, str("path", "p"), boolean("recursive", "r"), integer("max", "m", 1, 10))
	cases := []struct {
		input string
		want  in
		err   string
	}{
		{`{"path":"a","recursive":true,"max":3}`, in{"a", true, 3}, ""},
		{`{"path":"a","recursive":null,"max":null}`, in{Path: "a"}, ""},
		{` {"path":"a"} `, in{Path: "a"}, ""},
		{`{"path":null}`, in{}, `missing required field "path"`},
		{`{"path":"a","max":11}`, in{}, `"max" must be between 1 and 10, got 11`},
		{`{"path":"a","max":1e2}`, in{}, `"max" must be a whole number`},
		{`{"path":"a","extra":1,"more":2}`, in{}, `unknown field "extra"; unknown field "more"`},
		{`[]`, in{}, `must be a JSON object, got []`},
		{``, in{}, `missing required field "path"`},
	}
	for _, c := range cases {
		t.Run(c.input, func(t *testing.T) {
			var got in
			err := s.decode([]byte(c.input), &got)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want %q", err, c.err)
			case c.err == "" && got != c.want:
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSlowGuestIsAResult: a desktop or kernel call that ran out of its own
// time while the job goes on is told to the model; a job that ended is a
// Go error, as is a guest that cannot be reached.
func TestSlowGuestIsAResult(t *testing.T) {
	slow := fmt.Errorf("guest POST /kernel/execute: %w", context.DeadlineExceeded)
	res, err := slowFailure(context.Background(), NamePython, slow)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "did not answer in time") {
		t.Errorf("live job: %+v, %v; want a result for the model", res, err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := slowFailure(ended, NamePython, slow); err == nil {
		t.Error("ended job: want a Go error")
	}
	if _, err := slowFailure(context.Background(), NameComputer, fmt.Errorf("dial: %w", guest.ErrUnavailable)); err == nil {
		t.Error("unreachable guest: want a Go error")
	}
}

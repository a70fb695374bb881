package wiring

import (
	"bytes"
	"strings"
	"testing"
)

// TestNewExecStreams: stdin that is no terminal is forwarded unless -i=false
// says otherwise; -t asks for a TERM unless --env gives one; --max-output
// is read (no cap by default off a terminal).
func TestNewExecStreams(t *testing.T) {
	in, out := strings.NewReader("hi"), &bytes.Buffer{}
	st, err := NewExecStreams(in, out, out, StreamFlags{})
	if err != nil || st.Stdin != in || st.MaxOutput != 0 || st.TermEnv != "" {
		t.Fatalf("defaults: %+v %v", st, err)
	}
	st, _ = NewExecStreams(in, out, out, StreamFlags{InteractiveSet: true, MaxOutput: "1k"})
	if st.Stdin != nil || st.MaxOutput != 1024 {
		t.Fatalf("-i=false --max-output 1k: %+v", st)
	}
	st, _ = NewExecStreams(in, out, out, StreamFlags{TTY: true})
	if st.TermEnv == "" || !st.raw || st.Local != nil {
		t.Fatalf("-t off a terminal: %+v", st)
	}
	st, _ = NewExecStreams(in, out, out, StreamFlags{TTY: true, Env: []string{"TERM=dumb"}})
	if st.TermEnv != "" {
		t.Fatalf("-t -e TERM=dumb: %+v", st)
	}
	if _, err := NewExecStreams(in, out, out, StreamFlags{MaxOutput: "lots"}); err == nil || !strings.Contains(err.Error(), "--max-output") {
		t.Fatalf("bad --max-output: %v", err)
	}
}

package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/pkg/jsonmessage"
)

// tailLines is how many lines of output a build error repeats.
const tailLines = 8

// printer turns the engine's JSON message stream (build, pull, import) into
// readable lines and remembers what a failure report needs.
type printer struct {
	w      io.Writer
	step   string            // the last "Step n/m : ..." line of a build
	status map[string]string // last status per layer id, to skip repeats
	tail   []string          // the last lines of output
	auxID  string            // the image ID a build reports when done
}

// decodeStream copies a JSON message stream to w as text and returns the
// image ID the stream reported, if any. An error message in the stream
// becomes an error naming the failing step and the output just before it.
func decodeStream(r io.Reader, w io.Writer) (string, error) {
	p := &printer{w: w, status: map[string]string{}}
	dec := json.NewDecoder(r)
	for {
		var m jsonmessage.JSONMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return p.auxID, nil
		}
		if err != nil {
			return p.auxID, fmt.Errorf("read engine output: %w", err)
		}
		if err := p.message(m); err != nil {
			return p.auxID, err
		}
	}
}

func (p *printer) message(m jsonmessage.JSONMessage) error {
	switch {
	case m.Error != nil:
		return p.failure(m.Error.Message)
	case m.ErrorMessage != "":
		return p.failure(m.ErrorMessage)
	case m.Stream != "":
		p.stream(m.Stream)
	case m.Status != "":
		p.statusLine(m.ID, m.Status)
	case m.Aux != nil:
		p.aux(*m.Aux)
	}
	return nil
}

func (p *printer) stream(s string) {
	io.WriteString(p.w, s)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r ")
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "Step ") {
			p.step = line
			p.tail = p.tail[:0]
			continue
		}
		p.tail = append(p.tail, line)
		if len(p.tail) > tailLines {
			p.tail = p.tail[1:]
		}
	}
}

// statusLine prints pull and import progress once per change of status, so
// byte counters do not flood a log.
func (p *printer) statusLine(id, status string) {
	if p.status[id] == status {
		return
	}
	p.status[id] = status
	if id != "" {
		fmt.Fprintf(p.w, "%s: %s\n", id, status)
		return
	}
	fmt.Fprintln(p.w, status)
}

func (p *printer) aux(raw json.RawMessage) {
	var r struct{ ID string }
	if json.Unmarshal(raw, &r) == nil && r.ID != "" {
		p.auxID = r.ID
	}
}

// failure is the error for an error message in the stream.
func (p *printer) failure(msg string) error {
	msg = strings.TrimSpace(msg)
	var b strings.Builder
	if p.step != "" {
		fmt.Fprintf(&b, "%s: ", truncate(p.step, 200))
	}
	b.WriteString(msg)
	if len(p.tail) > 0 {
		b.WriteString("\nlast output:\n  ")
		b.WriteString(strings.Join(p.tail, "\n  "))
	}
	return errors.New(b.String())
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

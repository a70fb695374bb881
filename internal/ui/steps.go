package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/toolview"
)

// The timeline shows a tool call and its result (or the shell agent's
// command and how it ended) as one card, a step, the way the CLI prints
// it: a command as "$ command" with its output below, a write as the file
// and its first lines, an edit as a diff, a read or a list as one line.
// The output events a call's command writes while it runs grow the card
// (the script moves those of a later page into the card already shown;
// see job.js), and its result finishes it.

// Bounds of what a step card shows.
const (
	maxLive     = 64 << 10 // bytes of a running step's output kept (the last)
	fileLines   = 10       // lines of a written file shown
	diffMax     = 40       // lines of each side of an edit shown
	openSteps   = 3        // finished steps shown open at the end of a page
	shellKey    = "shell"  // the key of the shell agent's command
	callKeyPref = "c:"     // a tool call's key: the prefix of its id
)

// stepView is one step card: a call, the output it wrote so far, its
// result. A card made from events of a page that lacks the call (it is on
// an earlier page) has no Head; the script joins it to the card with the
// call when both are on the page.
type stepView struct {
	Key   string // the card's key in the page: callKeyPref+the call's id, or shellKey
	Head  bool   // the call is in the card
	Call  toolview.Call
	Since time.Time // when the call started
	// Lines are a write's first lines, Diff an edit's lines; More counts
	// those not shown.
	Lines []string
	Diff  []diffLine
	More  int
	Open  bool // the card starts open
	// Live is the output the call's command wrote as it ran: the last
	// maxLive bytes, LiveCut when earlier output was dropped.
	Live    []chunk
	liveLen int
	LiveCut bool
	Running bool
	Stopped bool // the job ended while the step ran
	// Replace: the result replaces the output shown while the call ran.
	Replace bool
	// Status says how the step ended: "exit 0", "failed", "done", with
	// its duration.
	Status string
	// Out is the result's text, in its streams; Fold starts it folded
	// (a read's or a list's result: the card is one line).
	Out  []chunk
	Fold bool
}

// chunk is a run of output of one stream ("stdout", "stderr", or "" for
// the tool's own lines), styled. A live chunk is styled once the page's
// events are all read (see steps.finish): only the ones kept.
type chunk struct {
	Stream string
	Spans  []Span
	text   string
}

// steps gathers a page's events into items, each call with its output
// and result in one step card.
type steps struct {
	items []item
	open  map[string]int // running cards by key: their index in items
}

// add turns one event into an item or into a part of a card.
func (s *steps) add(ev store.Event) {
	p, err := event.Decode(ev.Type, ev.Payload)
	if err != nil {
		s.items = append(s.items, toItem(ev))
		return
	}
	switch p := p.(type) {
	case event.ToolCall:
		s.start(ev, callKeyPref+p.ID, p.Step, toolview.ParseCall(p.Name, p.Input))
	case event.Command:
		s.start(ev, shellKey, 0, toolview.Call{Tool: "command", Kind: toolview.Command, Line: "$ " + firstLine(p.Command, 200), Code: p.Command})
	case event.Output:
		key := shellKey
		if p.Call != "" {
			key = callKeyPref + p.Call
		}
		s.card(ev, key, "output").Card.addLive(p.Stream, p.Text)
	case event.ToolResult:
		it := s.card(ev, callKeyPref+p.ID, p.Name)
		it.Step, it.Error = p.Step, p.IsError
		it.Media = mediaURLs(ev.JobID, p.Media)
		it.Cut = it.Cut || it.Card.result(p)
		delete(s.open, callKeyPref+p.ID)
	case event.Exit:
		it := s.card(ev, shellKey, "command")
		it.Error = p.ExitCode != 0 || p.TimedOut || p.OOMKilled
		it.Card.exit(p)
		delete(s.open, shellKey)
	default:
		if it := toItem(ev); it.Kind != "model" || it.Text != "" { // a step of tool calls only shows them
			s.items = append(s.items, it)
		}
	}
}

// start adds the card of a call.
func (s *steps) start(ev store.Event, key string, step int, c toolview.Call) {
	c = bounded(c)
	v := &stepView{Key: key, Head: true, Call: c, Since: ev.Time, Running: true}
	switch c.Kind {
	case toolview.Write:
		v.Lines, v.More = firstLines(c.New, fileLines)
	case toolview.Edit:
		v.Diff, v.More = editDiff(c.Old, c.New)
	}
	s.items = append(s.items, item{Seq: ev.Seq, Time: ev.Time, Kind: "step", Title: c.Tool, Step: step, Card: v})
	s.open[key] = len(s.items) - 1
}

// bounded is a call with its texts cut to maxShown bytes, its one line
// to 300 runes: a model may write a megabyte into an argument.
func bounded(c toolview.Call) toolview.Call {
	c.Line = firstLine(c.Line, 300)
	c.Code, _ = cut(c.Code)
	c.Old, _ = cut(c.Old)
	c.New, _ = cut(c.New)
	c.Args = slices.Clone(c.Args)
	for i := range c.Args {
		c.Args[i].Value, _ = cut(c.Args[i].Value)
	}
	return c
}

// card is the running card of key, or a new card without its call (on
// an earlier page) for a part of it.
func (s *steps) card(ev store.Event, key, tool string) *item {
	if i, ok := s.open[key]; ok {
		return &s.items[i]
	}
	v := &stepView{Key: key, Call: toolview.ParseCall(tool, nil), Since: ev.Time, Running: true}
	v.Call.Line = ""
	s.items = append(s.items, item{Seq: ev.Seq, Time: ev.Time, Kind: "step", Title: tool, Card: v})
	s.open[key] = len(s.items) - 1
	return &s.items[len(s.items)-1]
}

// addLive adds output a running command wrote, keeping the last maxLive
// bytes.
func (v *stepView) addLive(stream, text string) {
	if len(text) > maxLive {
		text, v.LiveCut = tail(text, maxLive), true
	}
	v.Live = append(v.Live, chunk{Stream: stream, text: text})
	v.liveLen += len(text)
	for v.liveLen > maxLive {
		v.liveLen -= len(v.Live[0].text)
		v.Live, v.LiveCut = v.Live[1:], true
	}
}

// result finishes the card with the call's result, and reports whether
// the result's text was cut. The result replaces the output shown while
// the call ran: it holds what the model saw, streams apart.
func (v *stepView) result(r event.ToolResult) bool {
	v.Running = false
	text, wasCut := cut(r.Text)
	status := ""
	for i, sec := range toolview.Sections(text) {
		if i == 0 && sec.Stream == "" && strings.HasPrefix(sec.Text, "exit code: ") {
			line, rest, _ := strings.Cut(sec.Text, "\n")
			status, _, _ = strings.Cut(strings.TrimPrefix(line, "exit code: "), " ")
			status = "exit " + status
			if sec.Text = rest; rest == "" {
				continue
			}
		}
		v.Out = append(v.Out, chunk{Stream: sec.Stream, Spans: ANSI(sec.Text)})
	}
	v.Live, v.LiveCut, v.Replace = nil, false, true
	switch {
	case status != "":
	case r.IsError:
		status = "failed"
	default:
		status = "done"
	}
	v.Status = status + " · " + seconds(r.DurationMS)
	v.Fold = v.Call.Kind == toolview.Read && !r.IsError
	return wasCut
}

// exit finishes the shell agent's card: its output is what it wrote.
func (v *stepView) exit(p event.Exit) {
	v.Running = false
	parts := []string{fmt.Sprintf("exit %d", p.ExitCode), seconds(p.DurationMS)}
	if p.TimedOut {
		parts = append(parts, "timed out")
	}
	if p.OOMKilled {
		parts = append(parts, "out of memory")
	}
	if p.Truncated {
		parts = append(parts, "output truncated")
	}
	v.Status = strings.Join(parts, " · ")
}

// finish marks the page's steps: the running ones of an ended job as
// stopped, the last few and the running ones open; and styles the output
// they kept.
func (s *steps) finish(final bool) []item {
	n := 0
	for i := len(s.items) - 1; i >= 0; i-- {
		v := s.items[i].Card
		if v == nil {
			continue
		}
		if v.Running && final {
			v.Running, v.Stopped = false, true
		}
		for j := range v.Live {
			v.Live[j].Spans = ANSI(v.Live[j].text)
		}
		v.Open = v.Running || n < openSteps
		n++
	}
	return s.items
}

// firstLines is text's first n lines and how many more it has.
func firstLines(text string, n int) ([]string, int) {
	if text == "" {
		return nil, 0
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) <= n {
		return lines, 0
	}
	return lines[:n], len(lines) - n
}

// editDiff is an edit as a diff: old's lines removed, new's added, each
// side cut to diffMax lines; the second result counts those cut.
func editDiff(old, new string) ([]diffLine, int) {
	var out []diffLine
	more := 0
	for _, side := range []struct{ kind, text string }{{"del", old}, {"add", new}} {
		lines, m := firstLines(side.text, diffMax)
		for _, l := range lines {
			out = append(out, diffLine{Kind: side.kind, Text: l})
		}
		more += m
	}
	return out, more
}

// tail is s's last n bytes or fewer, from a rune's start.
func tail(s string, n int) string {
	i := len(s) - n
	for i < len(s) && s[i]&0xc0 == 0x80 {
		i++
	}
	return s[i:]
}

// seconds is a duration in ms as "1.2 s".
func seconds(ms int64) string {
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// logService is a Service over one job and its log in memory.
type logService struct {
	job    store.Job
	events []store.Event
	reads  int // events read, to see a page does not read the whole log
	// noWorkspace is why the job's workspace cannot be read; nil: it can.
	noWorkspace error
	ws          workspace.Store // the job's workspace, if it has one
}

func (s *logService) Get(_ context.Context, id string) (store.Job, error) {
	if id != s.job.ID {
		return store.Job{}, store.ErrNotFound
	}
	return s.job, nil
}

func (s *logService) List(context.Context, store.ListOptions) (store.JobPage, error) {
	return store.JobPage{}, nil
}

func (s *logService) Events(_ context.Context, _ string, after int64, limit int) ([]store.Event, error) {
	end := min(int64(len(s.events)), after+int64(limit))
	if after >= end {
		return nil, nil
	}
	s.reads += int(end - after)
	return s.events[after:end], nil
}

func (s *logService) LastSeq(context.Context, string) (int64, error) {
	return int64(len(s.events)), nil
}

func (s *logService) Workspace(context.Context, string) (workspace.Store, error) {
	if s.noWorkspace != nil {
		return nil, s.noWorkspace
	}
	return s.ws, nil
}

func (s *logService) Diff(context.Context, string, bool, io.Writer) error { return nil }

func (s *logService) add(p event.Payload) {
	typ, b, err := event.Marshal(p)
	if err != nil {
		panic(err)
	}
	s.events = append(s.events, store.Event{JobID: s.job.ID, Seq: int64(len(s.events) + 1), Time: time.Unix(1700000000, 0), Type: typ, Payload: b})
}

const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

func newLog() *logService {
	s := &logService{job: store.Job{ID: "j1", Task: "Do it " + hostile, Status: store.StatusRunning, Turn: 1, CreatedAt: time.Unix(1700000000, 0)}}
	s.add(event.State{Status: store.StatusRunning, Attempt: 1})
	s.add(event.Model{Step: 1, Message: llm.Text(llm.RoleAssistant, "thinking "+hostile)})
	s.add(event.ToolCall{Step: 1, Name: "bash", Input: json.RawMessage(`{"command":"ls \u003c/pre\u003e"}`)})
	s.add(event.ToolResult{Step: 1, Name: "bash", Text: "\x1b[31mred " + hostile + "\x1b[0m\n" + strings.Repeat("line\n", 50), Images: 1, Media: []string{"1-0.png"}})
	s.add(event.Condensation{Step: 2, Kind: memory.KindSummarize, FromStep: 1, ToStep: 1, TokensBefore: 900, TokensAfter: 300})
	s.add(event.Message{Text: "steer " + hostile, Turn: 1})
	s.add(event.Git{Action: "push", Branch: "agentbox/j1", Error: "denied"})
	return s
}

func get(t *testing.T, h func(http.ResponseWriter, *http.Request) error, target string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.SetPathValue("id", "j1")
	w := httptest.NewRecorder()
	if err := h(w, r); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return w
}

// TestTimelineFragment: each kind of event renders, escaped, and the
// headers say which seqs the fragment holds.
func TestTimelineFragment(t *testing.T) {
	s := newLog()
	u := New(Config{}, s, nil)
	w := get(t, u.Timeline, "/ui/jobs/j1/timeline?after=0")
	body := w.Body.String()
	if w.Header().Get("X-Timeline-First") != "1" || w.Header().Get("X-Timeline-Last") != "7" {
		t.Errorf("headers %v", w.Header())
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<img src=x") || strings.Contains(body, "</pre>\"") {
		t.Errorf("unescaped job text in the fragment:\n%s", body)
	}
	for _, want := range []string{
		`data-seq="1"`, `data-seq="7"`, "&lt;script&gt;alert(1)&lt;/script&gt;",
		`<span class="prompt" aria-hidden="true">$ </span>ls &lt;/pre&gt;</pre>`, // bash's command as the command
		`<span class="ansi-fg-1">red &lt;script&gt;`,
		"ev-condensation", "context condensed (summarize)", "900 → 300 tokens",
		"message (turn 1)", "git push", "failed: denied", "ev-error",
		`<img class="ev-media" src="/v1/jobs/j1/media/1-0.png"`, // the screenshot, inline
	} {
		if !strings.Contains(body, want) {
			t.Errorf("fragment lacks %q:\n%s", want, body)
		}
	}
}

// TestTimelinePages: the page shows the last TimelinePage events of a
// long log, reading no more than those, and before= pages back to seq 1.
func TestTimelinePages(t *testing.T) {
	s := &logService{job: store.Job{ID: "j1", Task: "long", Status: store.StatusComplete}}
	for i := range 2000 {
		s.add(event.Notice{Step: i, Text: fmt.Sprint("notice ", i+1)})
	}
	u := New(Config{}, s, nil)
	r := httptest.NewRequest("GET", "/jobs/j1", nil)
	r.SetPathValue("id", "j1")
	w := httptest.NewRecorder()
	start := time.Now()
	if err := u.Job(w, r, Session{CSRF: "c"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a 2,000-event job page: %v, %d bytes", time.Since(start), w.Body.Len())
	body := w.Body.String()
	if s.reads != TimelinePage || strings.Count(body, `class="ev `) != TimelinePage ||
		!strings.Contains(body, `data-seq="2000"`) || !strings.Contains(body, `data-seq="1901"`) || strings.Contains(body, `data-seq="1900"`) {
		t.Errorf("the page read %d events, shows %d", s.reads, strings.Count(body, `class="ev `))
	}
	if !strings.Contains(body, `data-url="/ui/jobs/j1/timeline?before=1901"`) || !strings.Contains(body, `data-last="2000"`) {
		t.Error("no Show earlier button for seq 1901, or data-last is not 2000")
	}
	w = get(t, u.Timeline, "/ui/jobs/j1/timeline?before=1901")
	if w.Header().Get("X-Timeline-First") != "1801" || w.Header().Get("X-Timeline-Last") != "1900" {
		t.Errorf("before=1901: %v", w.Header())
	}
	w = get(t, u.Timeline, "/ui/jobs/j1/timeline?before=51")
	if b := w.Body.String(); w.Header().Get("X-Timeline-First") != "1" || strings.Count(b, `class="ev `) != 50 {
		t.Errorf("before=51: %v, %d items", w.Header(), strings.Count(b, `class="ev `))
	}
	w = get(t, u.Timeline, "/ui/jobs/j1/timeline?after=2000")
	if w.Header().Get("X-Timeline-Last") != "2000" || strings.Contains(w.Body.String(), "<li") {
		t.Errorf("after=2000: %v %q", w.Header(), w.Body.String())
	}
	for _, bad := range []string{"before=0", "after=-1", "after=x"} {
		r := httptest.NewRequest("GET", "/ui/jobs/j1/timeline?"+bad, nil)
		r.SetPathValue("id", "j1")
		if err := u.Timeline(httptest.NewRecorder(), r); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestJobHeader: the header fragment shows the status word, usage and the
// controls that fit the status, escaped.
func TestJobHeader(t *testing.T) {
	s := newLog()
	s.job.Usage = store.Usage{InputTokens: 12345, OutputTokens: 67, CostUSD: 0.5}
	s.job.ContextTokens = 4321
	u := New(Config{}, s, nil)
	body := get(t, u.JobHeader, "/ui/jobs/j1/header").Body.String()
	for _, want := range []string{`status-running">running<`, "12,345 / 67", "$0.50", "4,321 tokens", `id="cancel"`, "Do it &lt;script&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("header lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "artifacts.zip") || strings.Contains(body, "<script>") {
		t.Errorf("a running job's header offers the zip, or is not escaped:\n%s", body)
	}
	s.job.Status, s.job.Error = store.StatusError, "boom "+hostile
	body = get(t, u.JobHeader, "/ui/jobs/j1/header").Body.String()
	if !strings.Contains(body, `href="/v1/jobs/j1/artifacts.zip"`) || strings.Contains(body, `id="cancel"`) || !strings.Contains(body, "boom &lt;script&gt;") {
		t.Errorf("an ended job's header:\n%s", body)
	}
}

// TestCheckpointItem: a checkpoint event is a timeline item of its step,
// an error when it failed.
func TestCheckpointItem(t *testing.T) {
	for _, tt := range []struct {
		p    event.Checkpoint
		text string
	}{
		{event.Checkpoint{Tree: "workspace", Step: 3, Files: 120, Uploaded: 1, UploadedBytes: 40, MS: 12},
			"Checkpoint of the workspace after step 3: 120 files, 1 uploaded (40 bytes) in 12 ms."},
		{event.Checkpoint{Tree: "git", Step: 2, Error: "disk full"}, "Checkpoint of the git dir after step 2 failed: disk full"},
	} {
		typ, b, _ := event.Marshal(tt.p)
		it := toItem(store.Event{JobID: "j1", Seq: 1, Type: typ, Payload: b})
		if it.Title != "checkpoint" || it.Step != tt.p.Step || it.Text != tt.text || it.Error != (tt.p.Error != "") {
			t.Errorf("toItem(%+v) = %+v", tt.p, it)
		}
	}
}

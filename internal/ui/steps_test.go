package ui

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// call is a tool call event's payload.
func call(id, name, input string) event.ToolCall {
	return event.ToolCall{ID: id, Step: 1, Name: name, Input: json.RawMessage(input)}
}

// cards splits a fragment into its step cards' HTML, by data-key.
func cards(t *testing.T, body string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, li := range strings.Split(body, "<li ")[1:] {
		if m := regexp.MustCompile(`data-key="([^"]*)"`).FindStringSubmatch(li); m != nil {
			if _, dup := out[m[1]]; dup {
				t.Errorf("two cards of %s:\n%s", m[1], body)
			}
			out[m[1]] = li
		}
	}
	return out
}

func mustContain(t *testing.T, what, html string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(html, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, html)
		}
	}
}

func mustNotContain(t *testing.T, what, html string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(html, b) {
			t.Errorf("%s has %q:\n%s", what, b, html)
		}
	}
}

// TestTimelineStepCards: each tool's call and result are one card that
// reads as the CLI prints it: a command and its output with stderr set
// apart and no stream tags, a write's file and first lines, an edit as
// removed and added lines, a read as one line with its result folded,
// another tool's input as keys and values, never JSON escapes.
func TestTimelineStepCards(t *testing.T) {
	s := &logService{job: store.Job{ID: "j1", Status: store.StatusRunning}}
	s.add(call("t1", "bash", `{"command":"make \u0026\u0026 echo \"\u003cdone\u003e\""}`))
	s.add(event.ToolResult{ID: "t1", Step: 1, Name: "bash", IsError: true, DurationMS: 1500,
		Text: "exit code: 2 (failure)\n<stdout>\nbuilt <b>ok</b>\n</stdout>\n<stderr>\nmake: *** oops\n</stderr>\n"})
	s.add(call("t2", "write_file", `{"path":"src/hello.py","content":"l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\n"}`))
	s.add(event.ToolResult{ID: "t2", Step: 1, Name: "write_file", Text: "wrote 36 bytes to src/hello.py"})
	s.add(call("t3", "edit_file", `{"path":"src/hello.py","old_string":"print('old')\nx = 1","new_string":"print('new')"}`))
	s.add(event.ToolResult{ID: "t3", Step: 2, Name: "edit_file", Text: "edited src/hello.py"})
	s.add(call("t4", "read_file", `{"path":"a.go","start_line":3,"end_line":10}`))
	s.add(event.ToolResult{ID: "t4", Step: 2, Name: "read_file", Text: "3\tpackage a\n"})
	s.add(call("t5", "finish", `{"summary":"all <i>done</i>\nsecond line"}`))
	s.add(event.ToolResult{ID: "t5", Step: 3, Name: "finish", Text: "finished"})
	body := get(t, New(Config{}, s, nil).Timeline, "/ui/jobs/j1/timeline?after=0").Body.String()
	c := cards(t, body)
	if len(c) != 5 || strings.Count(body, "<li ") != 5 {
		t.Fatalf("%d cards in %d items, want 5 (a call and its result in one):\n%s", len(c), strings.Count(body, "<li "), body)
	}
	mustNotContain(t, "the timeline", body, "&lt;stdout&gt;", "&lt;/stdout&gt;", "&lt;stderr&gt;", `\u0026`, `\u003c`, `\"`, "<b>", "<i>", "exit code:")

	mustContain(t, "the bash card", c["c:t1"], `class="ev ev-step step-command step-done ev-error"`, `data-head="1"`,
		`<span class="prompt" aria-hidden="true">$ </span>make &amp;&amp; echo &#34;&lt;done&gt;&#34;</pre>`,
		`<span class="step-status">exit 2 · 1.5 s</span>`,
		`<pre class="step-out ansi">built &lt;b&gt;ok&lt;/b&gt;`+"\n</pre>",
		`<div class="step-stderr"><span class="stream-label">stderr</span><pre class="step-out ansi">make: *** oops`)
	mustContain(t, "the write card", c["c:t2"], `<span class="step-line">write src/hello.py</span>`,
		"<pre class=\"step-file\">l1\nl2\n", "l10\n</pre>", "… 2 more lines", "wrote 36 bytes")
	mustNotContain(t, "the write card", c["c:t2"], "l11")
	mustContain(t, "the edit card", c["c:t3"], `<span class="step-line">edit src/hello.py</span>`,
		`<del class="diff-del"><span class="sign" aria-hidden="true">-</span>print(&#39;old&#39;)</del><del class="diff-del"><span class="sign" aria-hidden="true">-</span>x = 1</del>`,
		`<ins class="diff-add"><span class="sign" aria-hidden="true">+</span>print(&#39;new&#39;)</ins>`)
	mustContain(t, "the read card", c["c:t4"], `<span class="step-line">read a.go lines 3-10</span>`,
		`<details class="step-fold"><summary>result</summary><pre class="step-out ansi">3	package a`)
	mustContain(t, "the finish card", c["c:t5"], "<dt>summary</dt><dd>all &lt;i&gt;done&lt;/i&gt;\nsecond line</dd>")
	// The last few finished steps are open, the ones before folded.
	for key, open := range map[string]bool{"c:t1": false, "c:t2": false, "c:t3": true, "c:t5": true} {
		if got := strings.Contains(c[key], `<details class="step" open>`); got != open {
			t.Errorf("card %s open: %v, want %v", key, got, open)
		}
	}
}

// TestTimelineRunningStep: a call without its result is a running card
// whose output grows with the call's output events (stderr marked), the
// last 64 KiB of it; a later page's output and result are cards without
// the call, of the same key, for the script to join; the page of an
// ended job shows a step that never finished as such.
func TestTimelineRunningStep(t *testing.T) {
	s := &logService{job: store.Job{ID: "j1", Status: store.StatusRunning}}
	s.add(call("t1", "bash", `{"command":"for i in 1 2 3; do echo $i; done"}`))
	s.add(event.Output{Call: "t1", Stream: "stdout", Text: "tick 1\n"})
	s.add(event.Output{Call: "t1", Stream: "stderr", Text: "warn <script>\n"})
	u := New(Config{}, s, nil)
	body := get(t, u.Timeline, "/ui/jobs/j1/timeline?after=0").Body.String()
	c := cards(t, body)["c:t1"]
	mustContain(t, "the running card", c, "step-running", `<span class="spinner" aria-hidden="true"></span>running <span class="elapsed" data-since="`,
		`<details class="step" open>`, `<p class="hint step-cut" hidden>`,
		`<pre class="step-out ansi"><span class="out">tick 1`+"\n</span><span class=\"out out-stderr\">warn &lt;script&gt;")
	mustNotContain(t, "the running card", c, "<script>")

	// Later pages: more output, then the result.
	s.add(event.Output{Call: "t1", Stream: "stdout", Text: "tick 2\n"})
	c = get(t, u.Timeline, "/ui/jobs/j1/timeline?after=3").Body.String()
	mustContain(t, "more output", c, `data-key="c:t1"`, "step-running", "tick 2")
	mustNotContain(t, "more output", c, "data-head", "for i in")
	s.add(event.ToolResult{ID: "t1", Step: 1, Name: "bash", DurationMS: 3000, Text: "exit code: 0 (success)\n<stdout>\ntick 1\ntick 2\n</stdout>\n"})
	c = get(t, u.Timeline, "/ui/jobs/j1/timeline?after=4").Body.String()
	mustContain(t, "the result", c, `data-key="c:t1"`, "step-done", `data-replace="1"`, "exit 0 · 3.0 s")

	// The whole page: one finished card, the result's output in place of
	// what was shown while it ran.
	c = get(t, u.Timeline, "/ui/jobs/j1/timeline?after=0").Body.String()
	if n := strings.Count(c, "<li "); n != 1 || strings.Contains(c, "warn") || !strings.Contains(c, "tick 2") {
		t.Errorf("%d items; the finished card:\n%s", n, c)
	}

	// 200 KiB of output: the card keeps the last 64 KiB and says so.
	s.add(call("t2", "bash", `{"command":"yes"}`))
	for i := range 200 {
		s.add(event.Output{Call: "t2", Stream: "stdout", Text: strings.Repeat(string(rune('a'+i%26)), 1023) + "\n"})
	}
	c = get(t, u.Timeline, "/ui/jobs/j1/timeline?after=5").Body.String()
	mustContain(t, "a long output", c, `<p class="hint step-cut">`, strings.Repeat("r", 1023)) // the last piece: 199%26 = 17
	if n := len(c); n > maxLive+16<<10 {
		t.Errorf("the card of 200 KiB of output is %d bytes", n)
	}

	// The job ended without the result: the step did not finish.
	s.job.Status = store.StatusCanceled
	w := get(t, func(w2 http.ResponseWriter, r *http.Request) error { return u.Job(w2, r, Session{}) }, "/jobs/j1")
	mustContain(t, "an ended job's page", w.Body.String(), "step-stopped", "not finished")
}

// TestTimelineShellSteps: the shell agent's command and its output (whose
// events name no call) are one card; its exit finishes the card and keeps
// the output, which is all there is of it.
func TestTimelineShellSteps(t *testing.T) {
	s := &logService{job: store.Job{ID: "j1", Status: store.StatusRunning}}
	s.add(event.Command{Command: "echo hi\necho oops >&2"})
	s.add(event.Output{Stream: "stdout", Text: "hi\n"})
	s.add(event.Output{Stream: "stderr", Text: "oops\n"})
	s.add(event.Exit{ExitCode: 1, DurationMS: 2000})
	body := get(t, New(Config{}, s, nil).Timeline, "/ui/jobs/j1/timeline?after=0").Body.String()
	if n := strings.Count(body, "<li "); n != 1 {
		t.Fatalf("%d items, want one card:\n%s", n, body)
	}
	mustContain(t, "the shell card", body, `data-key="shell"`, "step-done ev-error", "exit 1 · 2.0 s",
		"$ </span>echo hi\necho oops &gt;&amp;2</pre>", `<span class="out">hi`, `<span class="out out-stderr">oops`)
	mustNotContain(t, "the shell card", body, `data-replace`)
}

// TestTimelineStepHostile: a call id, a tool name and output chosen by
// an attacker stay text and attribute values; escape sequences are gone.
func TestTimelineStepHostile(t *testing.T) {
	s := &logService{job: store.Job{ID: "j1", Status: store.StatusRunning}}
	s.add(event.ToolCall{ID: `x"><script>alert(1)</script>`, Name: `<img src=x onerror=alert(2)>`, Input: json.RawMessage(`{"a":"<svg onload=alert(3)>"}`)})
	s.add(event.Output{Call: `x"><script>alert(1)</script>`, Stream: "stdout", Text: "\x1b]0;title\x07\x1b[31m<iframe src=javascript:alert(4)>\x1b[0m\n"})
	body := get(t, New(Config{}, s, nil).Timeline, "/ui/jobs/j1/timeline?after=0").Body.String()
	mustNotContain(t, "a hostile step", body, "<script", "<img", "<svg", "<iframe", "\x1b", "title")
	mustContain(t, "a hostile step", body, `data-key="c:x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		`<span class="ansi-fg-1">&lt;iframe src=javascript:alert(4)&gt;</span>`)
}

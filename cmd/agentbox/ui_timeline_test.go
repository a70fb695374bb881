package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// card is a page expression for the timeline's step card of data-key key
// (the last one).
func card(key string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#events li.ev-step[data-key=%q]')].pop()`, key)
}

// liveTicks is a page expression: the highest "tick N" in the running
// shell step's card (the one with its command), 0 for none, -1 when the
// card is not running.
const liveTicks = `(() => {
	const c = [...document.querySelectorAll('#events li.ev-step.step-running[data-key="shell"][data-head]')].pop();
	if (!c) return -1;
	const m = [...c.querySelector('.step-live pre').textContent.matchAll(/tick (\d+)/g)];
	return m.length ? Number(m[m.length - 1][1]) : 0;
})()`

// TestUITimelineLive: a running step's card is marked running, with its
// elapsed time, and its output grows on the page as the command writes it
// (the shell agent's output, whose events name no call), stderr set apart;
// the card ends finished with the exit code. On a page taller than the
// window, "Jump to latest" shows once the user scrolls up, and takes them
// back down. Reloaded, the card's command is on an earlier page of events:
// "Show earlier" joins them into one card again.
func TestUITimelineLive(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	tab := openUI(t, s)
	tab.run("a short window", chromedp.EmulateViewport(1000, 420))
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.querySelector('form.signout')`, 20*time.Second)
	id, code := s.submit(`echo start; for i in $(seq 1 150); do echo "tick $i"; [ $((i % 25)) = 0 ] && echo "warn <b>$i</b>" >&2; sleep 0.1; done; echo finished`)
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	tab.run("open the job's page", chromedp.Navigate(s.url+"/jobs/"+id))

	// Two observations of the running card: its output grew between them,
	// with no reload.
	tab.wait("the running step's output", liveTicks+" >= 3", 2*time.Minute)
	tab.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	first := evalUI[int](tab, liveTicks)
	if !evalUI[bool](tab, card("shell")+`.querySelector('.step-status .spinner') !== null`) {
		t.Error("the running step has no spinner")
	}
	tab.wait("the elapsed time", `/^\d+s$/.test(`+card("shell")+`.querySelector('.elapsed').textContent)`, 10*time.Second)
	if cmd := evalUI[string](tab, card("shell")+`.querySelector('.step-cmd')?.textContent ?? ''`); !strings.HasPrefix(cmd, "$ echo start; for i in") {
		t.Errorf("the card's command: %q", cmd)
	}
	tab.shot("running")
	tab.wait("more output", fmt.Sprintf("%s >= %d", liveTicks, first+10), time.Minute)
	second := evalUI[int](tab, liveTicks)
	t.Logf("the running step showed tick %d, then tick %d", first, second)
	if !evalUI[bool](tab, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}
	if n := evalUI[int](tab, `document.querySelectorAll('#events li.ev-step').length`); n != 1 {
		t.Errorf("%d step cards for one command", n)
	}

	// Finished: the card says how it ended and keeps the output, stderr
	// marked (and its tags as text).
	tab.wait("the finished card", statusIs("error")+"||"+statusIs("complete"), 2*time.Minute)
	tab.wait("the card finished", card("shell")+`?.classList.contains('step-done') && `+card("shell")+`.textContent.includes('finished')`, time.Minute)
	if st := evalUI[string](tab, card("shell")+`.querySelector('.step-status').textContent`); !strings.HasPrefix(st, "exit 0 · ") {
		t.Errorf("the finished card's status: %q", st)
	}
	if !evalUI[bool](tab, card("shell")+`.querySelector('.out-stderr')?.textContent.includes('warn <b>25</b>')`) ||
		evalUI[bool](tab, `!!document.querySelector('#events .step-live b')`) {
		t.Error("stderr is not a marked piece of text")
	}
	if evalUI[bool](tab, `!!document.querySelector('#events .spinner')`) {
		t.Error("a spinner after the step ended")
	}
	tab.shot("finished")

	// Jump to latest.
	if !evalUI[bool](tab, `document.documentElement.scrollHeight > window.innerHeight + 100`) {
		t.Fatalf("the page is not taller than the window: %d", evalUI[int](tab, `document.documentElement.scrollHeight`))
	}
	tab.run("scroll down", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.documentElement.scrollHeight)`))
	tab.wait("no Jump to latest at the bottom", `document.querySelector('#jump-latest').hidden`, 10*time.Second)
	tab.run("scroll up", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	tab.wait("Jump to latest", `!document.querySelector('#jump-latest').hidden`, 10*time.Second)
	tab.shot("jump")
	tab.run("jump", chromedp.Click(chromedp.CSS(`#jump-latest`)))
	tab.wait("the bottom of the page", `window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 40 && document.querySelector('#jump-latest').hidden`, 10*time.Second)

	// Reloaded, the page shows the last events: the step's end without its
	// command, which "Show earlier" brings, joined into one card again.
	tab.run("reload", chromedp.Reload())
	tab.wait("the step's end", card("shell")+`?.classList.contains('step-done')`, 20*time.Second)
	if evalUI[bool](tab, card("shell")+`.dataset.head === "1" || !document.querySelector('#earlier')`) {
		t.Fatalf("the job's last page has the command: too few output events (%d in the log) to test Show earlier", len(s.events(id)))
	}
	tab.run("show earlier", chromedp.Click(chromedp.CSS(`#earlier`)))
	tab.wait("one card with its command", `document.querySelectorAll('#events li.ev-step').length === 1 && `+card("shell")+`.dataset.head === "1"`, 20*time.Second)
	out := evalUI[string](tab, card("shell")+`.querySelector('.step-live pre').textContent`)
	if !strings.HasPrefix(out, "start\ntick 1\n") || !strings.Contains(out, "tick 150\n") || !evalUI[bool](tab, card("shell")+`.classList.contains('step-done') && !document.querySelector('#events .step-nohead')`) {
		t.Errorf("the joined card: %s…%s", out[:min(len(out), 40)], out[max(0, len(out)-40):])
	}
	tab.shot("earlier")
}

// TestUITimelineCards: an agent job's steps read as the CLI prints them,
// each call and its result one card: a write as its file and first lines,
// an edit as a diff whose removed and added lines are separate marked
// elements, a command with its output and its stderr apart (no stream
// tags), a read as one line; finished steps but the last few fold. The
// command that loops shows its output growing while it runs when the
// tools stream it (output events naming the call).
func TestUITimelineCards(t *testing.T) {
	t.Parallel()
	loop := `for i in $(seq 1 40); do echo "tick $i"; sleep 0.2; done`
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "notes.txt", "content": "alpha\nbeta\ngamma\n"})),
		step(llmtest.Call("edit_file", map[string]any{"path": "notes.txt", "old_string": "beta", "new_string": "BETA <b>bold</b>"})),
		step(llmtest.Call("bash", map[string]any{"command": "cat notes.txt; echo 'to stderr' >&2; exit 3"})),
		step(llmtest.Call("read_file", map[string]any{"path": "notes.txt"})),
		step(llmtest.Call("bash", map[string]any{"command": loop})),
		step(llmtest.Call("finish", map[string]any{"summary": "edited"})),
	}})
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.querySelector('form.signout')`, 20*time.Second)
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "Edit notes.txt"}, &j); code != http.StatusCreated {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	tab.run("open the job's page", chromedp.Navigate(s.url+"/jobs/"+j.JobID))

	// The loop's card while it runs: how much output it shows, sampled.
	loopCard := `[...document.querySelectorAll('#events li.ev-step.step-command')].find(c => c.querySelector('.step-cmd')?.textContent.includes('seq 1 40'))`
	tab.wait("the loop running", loopCard+`?.classList.contains('step-running')`, 2*time.Minute)
	var grew []int
	for evalUI[bool](tab, loopCard+`?.classList.contains('step-running') ?? false`) {
		n := evalUI[int](tab, loopCard+`?.querySelector('.step-live pre')?.textContent.length ?? 0`)
		if len(grew) == 0 || n > grew[len(grew)-1] {
			grew = append(grew, n)
		}
		time.Sleep(300 * time.Millisecond)
	}
	tab.wait("complete", statusIs("complete"), 2*time.Minute)
	tab.wait("the finish card", `!!document.querySelector('#events li.ev-step.step-done[data-key] .ev-kind') && [...document.querySelectorAll('#events li.ev-step .ev-kind')].some(k => k.textContent === 'finish')`, time.Minute)
	tab.shot("cards")

	if n := evalUI[int](tab, `document.querySelectorAll('#events li.ev-step').length`); n != 6 {
		t.Errorf("%d step cards for 6 calls", n)
	}
	// The edit: a diff card, its removed and added lines separate elements.
	del := evalUI[[]string](tab, `[...document.querySelectorAll('#events li.step-edit .step-diff del.diff-del')].map(e => e.textContent)`)
	ins := evalUI[[]string](tab, `[...document.querySelectorAll('#events li.step-edit .step-diff ins.diff-add')].map(e => e.textContent)`)
	if fmt.Sprint(del) != "[-beta]" || fmt.Sprint(ins) != "[+BETA <b>bold</b>]" {
		t.Errorf("the edit's diff: removed %q, added %q", del, ins)
	}
	if line := evalUI[string](tab, `document.querySelector('#events li.step-edit .step-line').textContent`); line != "edit notes.txt" {
		t.Errorf("the edit's line: %q", line)
	}
	if evalUI[bool](tab, `!!document.querySelector('#events .step-diff b')`) {
		t.Error("the edit's markup became markup")
	}
	// A folded card opens on a click, and stays as the user left it.
	tab.run("open the edit's card", chromedp.Click(chromedp.CSS(`#events li.step-edit > details > summary`)))
	tab.wait("the edit's diff shown", `document.querySelector('#events li.step-edit .step-diff ins.diff-add').getClientRects().length > 0`, 10*time.Second)
	tab.shot("diff")
	// The write: the file and its lines.
	if got := evalUI[string](tab, `document.querySelector('#events li.step-write .step-file').textContent`); got != "alpha\nbeta\ngamma\n" {
		t.Errorf("the write's lines: %q", got)
	}
	// The command: output, stderr apart, its exit code; no stream tags.
	bash := `[...document.querySelectorAll('#events li.step-command')].find(c => c.querySelector('.step-cmd').textContent.includes('exit 3'))`
	if got := evalUI[string](tab, bash+`.querySelector('.step-result > pre.step-out').textContent`); got != "alpha\nBETA <b>bold</b>\ngamma\n" {
		t.Errorf("the command's stdout: %q", got)
	}
	if got := evalUI[string](tab, bash+`.querySelector('.step-stderr pre').textContent`); got != "to stderr\n" {
		t.Errorf("the command's stderr: %q", got)
	}
	if st := evalUI[string](tab, bash+`.querySelector('.step-status').textContent`); !strings.HasPrefix(st, "exit 3 · ") || !evalUI[bool](tab, bash+`.classList.contains('ev-error')`) {
		t.Errorf("the command's status: %q", st)
	}
	if text := evalUI[string](tab, `document.querySelector('#events').textContent`); regexp.MustCompile(`</?std(out|err)>|\\u00|\\n`).MatchString(text) {
		t.Errorf("stream tags or JSON escapes in the timeline:\n%s", text)
	}
	// The read: one line.
	if got := evalUI[string](tab, `document.querySelector('#events li.step-read .step-line').textContent`); got != "read notes.txt" {
		t.Errorf("the read's line: %q", got)
	}
	// Finished steps fold but the last three (and the one opened).
	if open := evalUI[[]bool](tab, `[...document.querySelectorAll('#events li.ev-step > details.step')].map(d => d.open)`); fmt.Sprint(open) != "[false true false true true true]" {
		t.Errorf("open cards: %v", open)
	}

	// The loop's card, finished on the page: its result in place of what
	// it showed while it ran.
	if !evalUI[bool](tab, loopCard+`.classList.contains('step-done') && !`+loopCard+`.querySelector('.step-live') && `+loopCard+`.querySelector('.step-result pre').textContent.includes('tick 40')`) {
		t.Errorf("the loop's card did not end with its result: %s", evalUI[string](tab, loopCard+`.outerHTML.slice(0, 2000)`))
	}
	// The loop's output grew on the page while it ran, if the tools stream
	// output (events naming the call): the shell agent's test covers a
	// running step's output otherwise.
	streamed := 0
	for _, ev := range s.events(j.JobID) {
		var p struct{ Call string }
		if ev.Type == "output" && json.Unmarshal(ev.Payload, &p) == nil && p.Call != "" {
			streamed++
		}
	}
	t.Logf("%d output events name a call; the loop's card showed output growing through %v characters", streamed, grew)
	if streamed > 2 && len(grew) < 3 {
		t.Errorf("the tools streamed %d output events, but the loop's running card showed %v characters", streamed, grew)
	}
}

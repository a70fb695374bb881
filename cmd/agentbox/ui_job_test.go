package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// waitFor is a command that blocks the job's step until the test makes
// the file in its sandbox (see release).
func waitFor(file string) string {
	return fmt.Sprintf("until [ -e %s ]; do sleep 0.05; done; echo released %s", file, file)
}

// release makes the file a job's waitFor step waits for, in its sandbox.
func release(t *testing.T, jobID, file string) {
	t.Helper()
	ctr, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.agentbox.job="+jobID).Output()
	if err != nil || len(strings.Fields(string(ctr))) != 1 {
		t.Fatalf("the job's sandbox: %q %v", ctr, err)
	}
	if out, err := exec.Command("docker", "exec", strings.TrimSpace(string(ctr)), "touch", "/workspace/"+file).CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
}

// statusIs is a page expression: the job page's header shows status.
func statusIs(status string) string {
	return fmt.Sprintf(`document.querySelector('#job-summary .status')?.textContent === %q`, status)
}

// timelineHas is a page expression: an event of the timeline contains text.
func timelineHas(sel, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#events %s')].some(e => e.textContent.includes(%q))`, sel, text)
}

// TestUIJob: a job's page follows it live (the timeline grows and the
// status reaches complete without a reload), a follow-up message from the
// page starts its next turn whose events appear, and Cancel stops a
// running job.
func TestUIJob(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		// The first job, turn 1.
		step(llmtest.Call("bash", map[string]any{"command": `printf '\033[32mgreen\033[0m <b>not bold</b>\n'`})),
		step(llmtest.Call("bash", map[string]any{"command": waitFor("go")})),
		step(llmtest.Call("bash", map[string]any{"command": "echo three"})),
		step(llmtest.Call("finish", map[string]any{"summary": "all three ran"})),
		// Its turn 2, after the message sent from the page.
		step(llmtest.Call("bash", map[string]any{"command": "echo turn two"})),
		step(llmtest.Call("finish", map[string]any{"summary": "turn two done"})),
		// The second job, canceled from its page while it waits.
		step(llmtest.Call("bash", map[string]any{"command": waitFor("never")})),
	}})
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "Run three commands\n<i>and</i> finish"}, &j); code != http.StatusCreated {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.querySelector('table.jobs')`, 20*time.Second)
	tab.run("open the job's page", chromedp.Navigate(s.url+"/jobs/"+j.JobID))
	tab.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	tab.wait("the waiting step, running", statusIs("running")+" && "+timelineHas(".ev-step .step-cmd", "until [ -e go ]"), 2*time.Minute)
	before := evalUI[int](tab, `document.querySelectorAll('#events .ev').length`)
	if !evalUI[bool](tab, `!!document.querySelector('#events pre.ansi span.ansi-fg-2')`) || !evalUI[bool](tab, timelineHas("pre.ansi", "<b>not bold</b>")) {
		t.Errorf("the first output is not green text with its tags as text")
	}
	tab.shot("running")
	release(t, j.JobID, "go")
	tab.wait("complete", statusIs("complete")+" && "+timelineHas(".ev-step .step-out", "three"), 2*time.Minute)
	after := evalUI[int](tab, `document.querySelectorAll('#events .ev').length`)
	if after <= before || !evalUI[bool](tab, `window.notReloaded === true`) {
		t.Errorf("the timeline went from %d to %d events; reloaded: %v", before, after, !evalUI[bool](tab, `window.notReloaded === true`))
	}
	tab.wait("the zip link", `!!document.querySelector('#zip[href$="/artifacts.zip"]') && !document.querySelector('#cancel')`, 20*time.Second)
	if evalUI[bool](tab, `!!document.querySelector('#events i')`) || !evalUI[bool](tab, `document.querySelector('details.task pre').textContent.includes('<i>and</i>')`) {
		t.Error("the task's markup was not shown as text")
	}
	tab.shot("complete")

	// A follow-up message from the page: the job's turn 2 runs and its
	// events appear.
	tab.run("send a follow-up",
		chromedp.SendKeys(chromedp.CSS(`#message-text`), "Now say turn two"),
		chromedp.Click(chromedp.CSS(`#message button[type=submit]`)),
	)
	tab.wait("turn 2's events", timelineHas(".ev-message", "Now say turn two")+" && "+timelineHas(".ev-step .step-out", "turn two")+" && "+statusIs("complete"), 2*time.Minute)
	if got := evalUI[string](tab, `document.querySelector('#message-text').value`); got != "" {
		t.Errorf("the message box still holds %q", got)
	}
	tab.shot("turn-two")

	// An empty message is refused on the page, with a message.
	tab.run("send nothing", chromedp.Click(chromedp.CSS(`#message button[type=submit]`)))
	tab.wait("the refusal", `!document.querySelector('#message-error').hidden`, 10*time.Second)

	// Cancel a running job from its page.
	id2, code := s.submit("Wait forever")
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	tab.run("open the second job's page", chromedp.Navigate(s.url+"/jobs/"+id2))
	tab.wait("the second job waiting", statusIs("running")+" && "+timelineHas(".ev-step .step-cmd", "until [ -e never ]"), 2*time.Minute)
	tab.run("cancel", chromedp.Click(chromedp.CSS(`#cancel`)))
	tab.wait("canceled", statusIs("canceled"), 2*time.Minute)
	tab.shot("canceled")
	if got := s.job(id2).Status; got != "canceled" {
		t.Errorf("the API says %s", got)
	}
}

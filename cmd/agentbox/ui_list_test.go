package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// TestUIListLive: the job list shows a job submitted after the page opened
// without a reload, filters by status and searches the task text; it
// follows the system's dark setting and fits a 360 px screen.
func TestUIListLive(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	first, code := s.submit("echo the first job")
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the first job's row", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]')`, first), 20*time.Second)
	tab.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	second, _ := s.submit("echo a needle in the haystack")
	tab.wait("the second job's row, live", fmt.Sprintf(`window.notReloaded && !!document.querySelector('tr[data-job=%q]')`, second), 20*time.Second)
	waitUntil(t, time.Minute, func() bool { return s.job(second).Status == "complete" })
	tab.wait("its status, live", fmt.Sprintf(`window.notReloaded && document.querySelector('tr[data-job=%q] .status').textContent === "complete"`, second), 20*time.Second)
	if rows := evalUI[string](tab, `document.querySelector('tr[data-job] .task a').textContent`); rows != "echo a needle in the haystack" {
		t.Errorf("the newest job is not first: %q", rows)
	}

	// Search, with the keyboard: type into the search box and press Enter.
	tab.run("search", chromedp.SendKeys(chromedp.CSS(`#q`), "NEEDLE\r"))
	tab.wait("the search's result", fmt.Sprintf(`location.search.includes("q=NEEDLE") && document.querySelectorAll('tr[data-job]').length === 1 && !!document.querySelector('tr[data-job=%q]')`, second), 20*time.Second)
	tab.run("filter by status", chromedp.Navigate(s.url+"/?status=pending"))
	tab.wait("no pending job", `document.querySelectorAll('tr[data-job]').length === 0 && document.querySelector('.empty').textContent.includes("No job matches")`, 20*time.Second)

	// Dark, at 360 px: the list and a job's page fit, and the colours
	// follow the system's setting.
	light := evalUI[string](tab, `getComputedStyle(document.body).backgroundColor`)
	if _, err := chromedp.Call(tab.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	}); err != nil {
		t.Fatal(err)
	}
	tab.run("narrow", chromedp.EmulateViewport(360, 800), chromedp.Navigate(s.url+"/"))
	tab.wait("the list", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]')`, first), 20*time.Second)
	if dark := evalUI[string](tab, `getComputedStyle(document.body).backgroundColor`); dark == light {
		t.Errorf("the dark setting left the background %s", dark)
	}
	for name, page := range map[string]string{"list": "/", "job": "/jobs/" + second, "new": "/new"} {
		tab.run("open "+page, chromedp.Navigate(s.url+page))
		tab.wait(page, `document.readyState === "complete" && !!document.querySelector("main h1")`, 20*time.Second)
		if w := evalUI[int](tab, `document.documentElement.scrollWidth`); w > 360 {
			t.Errorf("%s is %d px wide on a 360 px screen", page, w)
		}
		tab.shot("dark-360px-" + name)
	}
}

// TestUIScreenshotInline: a screenshot the agent took shows in its job's
// timeline, loaded by the browser through the API's media route.
func TestUIScreenshotInline(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(computer("screenshot", nil)),
		step(llmtest.Call("finish", map[string]any{"summary": "looked at the desktop"})),
	}})
	j := s.runJob(t, "Take a screenshot of the desktop", nil)
	if j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", fmt.Sprintf(`!!document.querySelector('tr[data-job=%q]')`, j.JobID), 20*time.Second)
	tab.run("open the job", chromedp.Navigate(s.url+"/jobs/"+j.JobID))
	tab.wait("the screenshot, loaded", `(() => { const i = document.querySelector("img.ev-media"); return !!i && i.complete && i.naturalWidth > 0 })()`, 30*time.Second)
	if w := evalUI[int](tab, `document.querySelector("img.ev-media").naturalWidth`); w != 1024 {
		t.Errorf("the screenshot is %d px wide, want the desktop's 1024", w)
	}
	tab.shot("job")
}

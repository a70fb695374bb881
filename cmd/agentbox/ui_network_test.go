package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// TestUINetwork: a running job's page shows its connections in the
// timeline (the denied one marked) and, in its Network section, the host
// the proxy denied; "Allow for this job" puts the widened policy in force
// (an event by the web UI) and the host leaves the denied list, without a
// reload. The connections are written into the server's store as the
// egress proxy records them (this test is about the page, not the proxy).
func TestUINetwork(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": waitFor("go")})),
		step(llmtest.Call("finish", map[string]any{"summary": "done"})),
	}})
	id, code := s.submit("Fetch a page")
	if code != http.StatusCreated {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", `!!document.querySelector('table.jobs')`, 20*time.Second)
	tab.run("open the job's page", chromedp.Navigate(s.url+"/jobs/"+id))
	tab.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	tab.wait("the job waiting", statusIs("running")+" && "+timelineHas(".ev-step .step-cmd", "until [ -e go ]"), 2*time.Minute)

	st, err := sqlite.Open(t.Context(), filepath.Join(s.dataDir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, ev := range []event.Payload{
		event.Network{Decision: "deny", Host: "late.test", Port: 443, Protocol: "connect", Reason: "late.test:443 is not in the job's allow list"},
		event.Network{Decision: "deny", Host: "late.test", Port: 443, Protocol: "connect", Reason: "late.test:443 is not in the job's allow list"},
	} {
		typ, b, _ := event.Marshal(ev)
		if _, err := st.AppendEvent(context.Background(), id, typ, b); err != nil {
			t.Fatal(err)
		}
	}
	button := `document.querySelector('#network button.allow-host[data-host="late.test:443"]')`
	tab.wait("the denial in the timeline and the section", timelineHas(".ev-denied .ev-mark", "denied")+" && "+timelineHas(".ev-denied", "late.test:443")+
		" && !!"+button+` && document.querySelector('#network tr.denied .num')?.textContent === "2"`, time.Minute)
	tab.shot("network-denied")
	tab.run("allow late.test for this job", chromedp.Click(chromedp.CSS(`#network button.allow-host`)))
	tab.wait("late.test allowed", "!"+button+` && document.querySelector('#network .net-mode')?.textContent === "allow"`+
		` && [...document.querySelectorAll('#network dd code')].some(c => c.textContent === "late.test:443")`, 30*time.Second)
	tab.wait("the change in the timeline", timelineHas(".ev-info", "Changed by web UI: allow late.test:443"), time.Minute)
	if !evalUI[bool](tab, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}
	tab.shot("network-allowed")
	var by string
	for _, ev := range s.events(id) {
		if ev.Type == event.TypeNetworkPolicy {
			p, _ := event.As[event.NetworkPolicy](ev.Type, ev.Payload)
			by = p.By
		}
	}
	if by != "web UI" {
		t.Errorf("the policy change is recorded as by %q", by)
	}
	release(t, id, "go")
	tab.wait("complete", statusIs("complete"), 2*time.Minute)
}

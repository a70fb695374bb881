package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/store"
)

// UIOptions size the web UI benchmark: a store of Jobs jobs, one of them
// with Steps agent steps, and Requests timed requests of each page.
type UIOptions struct {
	Jobs     int // default 10,000
	Steps    int // default 2,000
	Requests int // default 50
}

func (o UIOptions) withDefaults() UIOptions {
	if o.Jobs <= 0 {
		o.Jobs = 10000
	}
	if o.Steps <= 0 {
		o.Steps = 2000
	}
	if o.Requests <= 0 {
		o.Requests = 50
	}
	return o
}

// UIRow is the timing of one page.
type UIRow struct {
	Name  string
	Stats Stats
	Max   time.Duration
	Bytes int // of the last answer
}

// The statuses the filled jobs cycle through, most of them ended.
var fillStatuses = []store.Status{store.StatusComplete, store.StatusComplete, store.StatusError,
	store.StatusComplete, store.StatusCanceled, store.StatusComplete, store.StatusRunning, store.StatusPending}

// FillUI fills st with o.Jobs jobs, one a minute back from now (so the
// newest is the list's first), and gives the newest o.Steps steps of
// events: a model answer, a tool call and a tool result a step. It
// returns that job's ID.
func FillUI(ctx context.Context, st store.Store, o UIOptions) (string, error) {
	o = o.withDefaults()
	start := time.Now().UTC().Add(-time.Duration(o.Jobs) * time.Minute)
	var big string
	for i := range o.Jobs {
		created := start.Add(time.Duration(i) * time.Minute)
		j := store.Job{ID: fmt.Sprintf("job_%011x%09d", created.UnixMilli(), i), Status: fillStatuses[i%len(fillStatuses)],
			Task: fmt.Sprintf("Task %d: fix the failing test in package pkg%d\nand explain the change in the summary.", i, i%97),
			Turn: 1, Attempts: 1, MaxAttempts: 3, Steps: i % 40,
			Usage:     store.Usage{InputTokens: int64(i%40) * 3000, OutputTokens: int64(i%40) * 200, CostUSD: float64(i%40) * 0.011},
			CreatedAt: created, UpdatedAt: created.Add(30 * time.Second), StartedAt: created.Add(time.Second)}
		if j.Status.Final() {
			j.EndedAt = j.UpdatedAt
		}
		if i == o.Jobs-1 {
			j.Status, j.Steps, j.EndedAt = store.StatusComplete, o.Steps, j.UpdatedAt
		}
		if _, _, err := st.CreateJob(ctx, j); err != nil {
			return "", fmt.Errorf("fill jobs: %w", err)
		}
		big = j.ID
	}
	return big, fillSteps(ctx, st, big, o.Steps)
}

// fillSteps logs steps agent steps of job id.
func fillSteps(ctx context.Context, st store.Store, id string, steps int) error {
	for s := 1; s <= steps; s++ {
		input, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("go test ./pkg%d/... 2>&1 | tail -20", s%97)})
		out := strings.Repeat(fmt.Sprintf("\x1b[32mok\x1b[0m  \tgithub.com/example/pkg%d\t0.%03ds\n", s, s%1000), 8)
		msg := llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockText, Text: fmt.Sprintf("Step %d: I run the tests of pkg%d to see what fails.", s, s%97)},
			{Type: llm.BlockToolUse, ID: fmt.Sprintf("toolu_%d", s), Name: "bash", Input: input}}}
		for _, p := range []event.Payload{
			event.Model{Step: s, Message: msg, StopReason: "tool_use", DurationMS: 1800,
				Usage: llm.Usage{InputTokens: 20000 + int64(s), OutputTokens: 120}},
			event.ToolCall{Step: s, ID: fmt.Sprintf("toolu_%d", s), Name: "bash", Input: input},
			event.ToolResult{Step: s, ID: fmt.Sprintf("toolu_%d", s), Name: "bash", Text: out, DurationMS: 900},
		} {
			typ, b, err := event.Marshal(p)
			if err != nil {
				return err
			}
			if _, err := st.AppendEvent(ctx, id, typ, b); err != nil {
				return fmt.Errorf("fill events: %w", err)
			}
		}
	}
	return nil
}

// UI signs in to the web UI at base with token, then times o.Requests
// requests of each page, one after another: the job list's first page and
// the page of job big as a browser's navigation asks for them, and the
// API's first page of 50 jobs for comparison.
func UI(ctx context.Context, base, token, big string, o UIOptions) ([]UIRow, error) {
	o = o.withDefaults()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cookie, err := signIn(ctx, hc, base, token)
	if err != nil {
		return nil, err
	}
	nav := map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	pages := []struct{ name, path string }{
		{"GET / (job list, first page)", "/"},
		{fmt.Sprintf("GET /jobs/{id} (%d steps)", o.Steps), "/jobs/" + big},
		{"GET /v1/jobs?limit=50 (API)", "/v1/jobs?limit=50"},
	}
	var rows []UIRow
	for i, p := range pages {
		h := nav
		if i == 2 {
			h = map[string]string{"Authorization": "Bearer " + token}
		}
		r, err := timePage(ctx, hc, base+p.path, h, big, o.Requests)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", p.name, err)
		}
		r.Name = p.name
		rows = append(rows, r)
	}
	return rows, nil
}

// signIn posts the sign-in form as the UI's page does and returns the
// session cookie ("name=value").
func signIn(ctx context.Context, hc *http.Client, base, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return "", err
	}
	for k, v := range map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": base,
		"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"} {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("sign in: %w", err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "agentbox_session" && c.Value != "" {
			return c.Name + "=" + c.Value, nil
		}
	}
	return "", fmt.Errorf("sign in: %s and no session cookie", resp.Status)
}

// timePage requests u n times and times each until its whole body is
// read; each answer must name the job want (the list's newest, the job of
// the page), so a sign-in page is not timed for the page.
func timePage(ctx context.Context, hc *http.Client, u string, h map[string]string, want string, n int) (UIRow, error) {
	var ds []time.Duration
	var r UIRow
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return r, err
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		begin := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return r, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(begin)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			return r, fmt.Errorf("%s, not a page that names %s: %v %.200s", resp.Status, want, err, b)
		}
		ds, r.Bytes, r.Max = append(ds, d), len(b), max(r.Max, d)
	}
	r.Stats = summarize(ds)
	return r, nil
}

// UIMarkdown renders the rows as a table.
func UIMarkdown(w io.Writer, o UIOptions, rows []UIRow) {
	o = o.withDefaults()
	fmt.Fprintf(w, "%d jobs in SQLite, the newest with %d steps (%d events); %d requests each, one at a time.\n\n",
		o.Jobs, o.Steps, 3*o.Steps, o.Requests)
	fmt.Fprintln(w, "| request | p50 | p95 | max | bytes |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d |\n", r.Name, ms(r.Stats.P50), ms(r.Stats.P95), ms(r.Max), r.Bytes)
	}
}

package ui

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
)

// listOnly is a Service with a fixed page of jobs; the UI reads nothing else
// for the list.
type listOnly struct {
	Service
	jobs []store.Job
	got  store.ListOptions
}

func (l *listOnly) List(_ context.Context, opts store.ListOptions) (store.JobPage, error) {
	l.got = opts
	return store.JobPage{Jobs: l.jobs, NextCursor: "c2"}, nil
}

// TestRowsEscapeAndFilter renders the list's rows for a job whose task is
// hostile HTML: it must come out as text, and the filters must reach the
// store and the next page's link.
func TestRowsEscapeAndFilter(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	svc := &listOnly{jobs: []store.Job{{
		ID: "job_1", Status: store.StatusRunning, Steps: 3, Usage: store.Usage{CostUSD: 0.126},
		Task: "\n  <script>alert(1)</script> \"quoted\" & more\nsecond line", CreatedAt: now.Add(-90 * time.Minute),
	}}}
	u := New(Config{Now: func() time.Time { return now }}, svc, nil)
	w := httptest.NewRecorder()
	if err := u.Rows(w, httptest.NewRequest("GET", "/ui/rows?status=running&q=a%26b", nil)); err != nil {
		t.Fatal(err)
	}
	body := w.Body.String()
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the task is not escaped:\n%s", body)
	}
	if strings.Contains(body, "second line") {
		t.Errorf("more than the task's first line:\n%s", body)
	}
	for _, want := range []string{`href="/jobs/job_1"`, ">running<", "$0.13", "1h ago", `href="/?cursor=c2&amp;q=a%26b&amp;status=running"`} {
		if !strings.Contains(body, want) {
			t.Errorf("rows lack %s:\n%s", want, body)
		}
	}
	if svc.got.Status != store.StatusRunning || svc.got.Query != "a&b" || svc.got.Limit != PageSize {
		t.Errorf("the store was asked %+v", svc.got)
	}
}

func TestFirstLineAndAge(t *testing.T) {
	if got := firstLine("\n\n  hello world  \nmore", 8); got != "hello w…" {
		t.Errorf("firstLine = %q", got)
	}
	for d, want := range map[time.Duration]string{10 * time.Second: "just now", 5 * time.Minute: "5m ago", 30 * time.Hour: "30h ago", 72 * time.Hour: "3d ago"} {
		if got := render.Ago(d); got != want {
			t.Errorf("render.Ago(%v) = %q, want %q", d, got, want)
		}
	}
	if thousands(1234567) != "1,234,567" || thousands(-1000) != "-1,000" || thousands(12) != "12" {
		t.Errorf("thousands: %s %s %s", thousands(1234567), thousands(-1000), thousands(12))
	}
}

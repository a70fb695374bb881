package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
)

// PageSize is the job list's page.
const PageSize = 50

// statuses are the job list's filters, in the order shown.
var statuses = []store.Status{store.StatusPending, store.StatusRunning, store.StatusComplete, store.StatusError, store.StatusCanceled}

func (u *UI) funcs() template.FuncMap {
	return template.FuncMap{
		"firstLine": firstLine,
		"age":       func(t time.Time) string { return render.Ago(u.cfg.Now().Sub(t)) },
		"cost":      func(usd float64) string { return fmt.Sprintf("$%.2f", usd) },
		"jobURL":    func(id string) string { return "/jobs/" + url.PathEscape(id) },
		"rfc3339":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"thousands": thousands,
	}
}

// listQuery is a job list's filters as the page's URL carries them.
type listQuery struct {
	Status store.Status
	Q      string
	Cursor string
}

func (q listQuery) encode(cursor string) string {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", string(q.Status))
	}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return v.Encode()
}

// listData is the job list page's and its rows' data.
type listData struct {
	Query    listQuery
	Statuses []store.Status
	Jobs     []store.Job
	// Next is the next page's URL, "" on the last; Query its filters
	// (for the live refresh).
	Next, First, Refresh string
	Problem              string
}

func (u *UI) list(r *http.Request) (listData, error) {
	q := r.URL.Query()
	lq := listQuery{Status: store.Status(q.Get("status")), Q: strings.TrimSpace(q.Get("q")), Cursor: q.Get("cursor")}
	d := listData{Query: lq, Statuses: statuses}
	page, err := u.svc.List(r.Context(), store.ListOptions{Status: lq.Status, Query: lq.Q, Cursor: lq.Cursor, Limit: PageSize})
	if err != nil {
		return d, err
	}
	d.Jobs = page.Jobs
	if page.NextCursor != "" {
		d.Next = "/?" + lq.encode(page.NextCursor)
	}
	if lq.Cursor != "" {
		d.First = "/?" + lq.encode("")
	}
	d.Refresh = "/ui/rows?" + lq.encode(lq.Cursor)
	return d, nil
}

// Jobs serves the job list, "/": newest first, PageSize a page, filtered
// by status and task text; its script refreshes the rows.
func (u *UI) Jobs(w http.ResponseWriter, r *http.Request, s Session) error {
	d, err := u.list(r)
	if err != nil {
		return err
	}
	return u.render(w, http.StatusOK, "jobs", pageData{Title: "Jobs", Nav: "jobs", Session: s, Scripts: []string{"jobs.js"}, Data: d})
}

// Rows serves GET /ui/rows: the job list's rows for the same query, for
// the page's refresh.
func (u *UI) Rows(w http.ResponseWriter, r *http.Request) error {
	d, err := u.list(r)
	if err != nil {
		return err
	}
	return u.fragment(w, "jobs", "rows", d)
}

// Job serves a job's page, "/jobs/{id}".
func (u *UI) Job(w http.ResponseWriter, r *http.Request, s Session) error {
	j, err := u.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	d := jobData{Job: j}
	if d.Timeline, err = u.timelineData(r, j); err != nil {
		return err
	}
	if d.Tabs, err = u.tabsData(r, j); err != nil {
		return err
	}
	d.Network = u.networkLinks(j.ID) // the script loads the section: it reads the log
	return u.render(w, http.StatusOK, "job", pageData{Title: firstLine(j.Task, 60), Session: s, Scripts: []string{"job.js", "tabs.js"}, Data: d})
}

// jobData is the job page's data: the job, and what its timeline
// (timeline.go), its other tabs (tabs.go) and its Network section
// (network.go) need.
type jobData struct {
	Job      store.Job
	Timeline any
	Tabs     any
	Network  networkView
}

// firstLine is s's first non-blank line, cut to n runes with an ellipsis.
func firstLine(s string, n int) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			s = line
			break
		}
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// thousands writes n with thin separators: 12,345.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// TimelinePage is how many events the job page renders at a time: the
// last ones with the page, earlier ones a page per "Show earlier".
const TimelinePage = 100

// lastSeqer finds the end of a job's log (jobs.Service.LastSeq); a
// Service without it shows a log's first page instead of its last.
type lastSeqer interface {
	LastSeq(ctx context.Context, id string) (int64, error)
}

// timelineView is the job page's header and timeline.
type timelineView struct {
	Header headerView
	Page   timelinePage
}

// timelinePage is a run of a job's events as the timeline renders them.
type timelinePage struct {
	JobID string
	Items []item
	// First and Last are the seqs of the page's first and last events
	// (Last is after for an empty page after after).
	First, Last int64
	// Earlier is the URL of the page before this one; "" at the start.
	Earlier string
}

// headerView is the job page's header: the job, its times as shown.
type headerView struct {
	Job                     store.Job
	Final                   bool
	Created, Started, Ended string
	Duration                string
	ZipURL, CancelURL       string
	HeaderURL, EventsURL    string
	MessagesURL             string
	// Model and Limits are what the job runs with (see runsWith).
	Model, Limits string
}

// timelineData is the job page's header and the last page of its log.
func (u *UI) timelineData(r *http.Request, j store.Job) (any, error) {
	last := int64(TimelinePage) // without LastSeq: the first page
	if ls, ok := u.svc.(lastSeqer); ok {
		var err error
		if last, err = ls.LastSeq(r.Context(), j.ID); err != nil {
			return nil, err
		}
	}
	p, err := u.page(r.Context(), j.ID, max(0, last-TimelinePage), TimelinePage, j.Status.Final())
	if err != nil {
		return nil, err
	}
	return timelineView{Header: u.header(j), Page: p}, nil
}

// page reads up to limit events after seq after and makes them items;
// final says the job has ended (a step without its result then stopped).
func (u *UI) page(ctx context.Context, id string, after int64, limit int, final bool) (timelinePage, error) {
	p := timelinePage{JobID: id, First: after + 1, Last: after}
	if limit <= 0 {
		return p, nil
	}
	evs, err := u.svc.Events(ctx, id, after, limit)
	if err != nil {
		return p, err
	}
	st := steps{open: map[string]int{}}
	for _, ev := range evs {
		p.Last = ev.Seq
		st.add(ev)
	}
	p.Items = st.finish(final)
	for i := range p.Items {
		u.keyMedia(id, &p.Items[i])
	}
	if len(evs) > 0 {
		p.First = evs[0].Seq
	}
	if p.First > 1 {
		p.Earlier = "/ui/jobs/" + url.PathEscape(id) + "/timeline?before=" + strconv.FormatInt(p.First, 10)
	}
	return p, nil
}

// keyMedia adds job id's media key to the item's image URLs.
func (u *UI) keyMedia(id string, it *item) {
	if u.cfg.MediaKey == nil || len(it.Media) == 0 {
		return
	}
	k := "?k=" + url.QueryEscape(u.cfg.MediaKey(id))
	for i := range it.Media {
		it.Media[i] += k
	}
}

// Timeline serves GET /ui/jobs/{id}/timeline: the job's events after seq
// after (the live page's new ones, TimelinePage at most) or the page
// before seq before ("Show earlier"), as the timeline's items. The
// response's X-Timeline-First and X-Timeline-Last headers are the seqs
// the items span, so the script knows where to go on.
func (u *UI) Timeline(w http.ResponseWriter, r *http.Request) error {
	id, q := r.PathValue("id"), r.URL.Query()
	after, limit := int64(0), TimelinePage
	var err error
	switch {
	case q.Has("before"):
		var before int64
		if before, err = strconv.ParseInt(q.Get("before"), 10, 64); err == nil && before < 1 {
			err = errors.New("below 1")
		}
		after = max(0, before-1-TimelinePage)
		limit = int(before - 1 - after)
	case q.Has("after"):
		if after, err = strconv.ParseInt(q.Get("after"), 10, 64); err == nil && after < 0 {
			err = errors.New("negative")
		}
	}
	if err != nil {
		return fmt.Errorf("timeline of job %s: %w: after and before are event seqs (%v)", id, store.ErrInvalid, err)
	}
	p, err := u.page(r.Context(), id, after, limit, false)
	if err != nil {
		return err
	}
	w.Header().Set("X-Timeline-First", strconv.FormatInt(p.First, 10))
	w.Header().Set("X-Timeline-Last", strconv.FormatInt(p.Last, 10))
	return u.fragment(w, "job", "timeline-page", p)
}

// JobHeader serves GET /ui/jobs/{id}/header: the job page's summary
// (status, usage, times, cancel and download), for its live refresh.
func (u *UI) JobHeader(w http.ResponseWriter, r *http.Request) error {
	j, err := u.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return u.fragment(w, "job", "job-summary", u.header(j))
}

func (u *UI) header(j store.Job) headerView {
	base := "/v1/jobs/" + url.PathEscape(j.ID)
	h := headerView{Job: j, Final: j.Status.Final(), Created: clock(j.CreatedAt), Started: clock(j.StartedAt), Ended: clock(j.EndedAt),
		ZipURL: base + "/artifacts.zip", CancelURL: base + "/cancel", MessagesURL: base + "/messages", EventsURL: base + "/events",
		HeaderURL: "/ui/jobs/" + url.PathEscape(j.ID) + "/header"}
	h.Model, h.Limits = u.runsWith(j)
	switch {
	case j.StartedAt.IsZero():
	case !j.EndedAt.IsZero():
		h.Duration = j.EndedAt.Sub(j.StartedAt).Round(time.Second).String()
	default:
		h.Duration = u.cfg.Now().Sub(j.StartedAt).Round(time.Second).String() + " so far"
	}
	return h
}

// clock is a time as the header shows it, "" for none.
func clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

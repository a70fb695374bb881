package ui

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/wire"
)

// field is one text input of the new-job form.
type field struct {
	ID, Label string
	// Path is the input's JSON path in the submission, as the API's
	// field errors name it.
	Path              string
	Placeholder, Mode string // Mode is the inputmode
}

// newJobData is what the new-job form shows: its limits, and the
// server's default model as the model's placeholder.
type newJobData struct {
	Limits []field
	Model  string
}

// limitFields are the form's limits, in the order shown, each with the
// server's default as its placeholder (none without Defaults).
func limitFields(d *wire.Effective) []field {
	var l wire.Limits
	if d != nil {
		l = d.Limits
	}
	return []field{
		{ID: "timeout", Label: "Timeout", Path: "limits.timeout", Placeholder: durationText(time.Duration(l.Timeout)), Mode: "text"},
		{ID: "max_steps", Label: "Max steps", Path: "limits.max_steps", Placeholder: countText(l.MaxSteps), Mode: "numeric"},
		{ID: "memory", Label: "Memory", Path: "limits.memory", Placeholder: sizeText(int64(l.Memory)), Mode: "text"},
		{ID: "cpus", Label: "CPUs", Path: "limits.cpus", Placeholder: cpusText(l.CPUs), Mode: "decimal"},
		{ID: "disk", Label: "Disk", Path: "limits.disk", Placeholder: sizeText(int64(l.Disk)), Mode: "text"},
	}
}

// NewJob serves the new job form, "/new". Its script (new.js) submits
// it to POST /v1/jobs and shows the API's errors at their fields.
func (u *UI) NewJob(w http.ResponseWriter, r *http.Request, s Session) error {
	d := newJobData{Limits: limitFields(u.cfg.Defaults)}
	if u.cfg.Defaults != nil {
		d.Model = u.cfg.Defaults.Model
	}
	return u.render(w, http.StatusOK, "new", pageData{Title: "New job", Nav: "new", Session: s, Scripts: []string{"new.js"}, Data: d})
}

// durationText writes d as the form takes it: "30m", "1h30m", "45s";
// "" for none.
func durationText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return units.FormatDuration(d)
}

// sizeText writes n bytes as the form takes them: "2g", "512m", or
// bytes; "" for none.
func sizeText(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dg", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dm", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

func countText(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func cpusText(c float64) string {
	if c <= 0 {
		return ""
	}
	return strconv.FormatFloat(c, 'f', -1, 64)
}

// runsWith is the model and limits job j runs with, as the job page
// shows them: what it asked for, the server's defaults for the rest.
func (u *UI) runsWith(j store.Job) (model, limits string) {
	e := wire.Effective{Model: j.Model}
	if d := u.cfg.Defaults; d != nil {
		e = d.For(j.Model, limitsOf(j.Limits))
	} else {
		e.Limits = limitsOf(j.Limits)
	}
	l := e.Limits
	var parts []string
	add := func(v, what string) {
		if v != "" {
			parts = append(parts, v+" "+what)
		}
	}
	add(durationText(time.Duration(l.Timeout)), "timeout")
	add(countText(l.MaxSteps), "steps")
	add(sizeText(int64(l.Memory)), "memory")
	add(cpusText(l.CPUs), "CPUs")
	add(sizeText(int64(l.Disk)), "disk")
	add(sizeText(int64(l.Egress)), "egress")
	return e.Model, strings.Join(parts, " · ")
}

// limitsOf is a job's limits as the API gives them.
func limitsOf(l store.Limits) wire.Limits {
	return wire.Limits{Timeout: wire.Duration(l.Timeout), MaxSteps: l.MaxSteps, Memory: wire.ByteSize(l.MemoryBytes),
		CPUs: float64(l.NanoCPUs) / 1e9, Disk: wire.ByteSize(l.DiskBytes), ContextWindow: l.ContextWindow, Egress: wire.ByteSize(l.EgressBytes)}
}

package ui

import "net/http"

// field is one text input of the new-job form.
type field struct {
	ID, Label string
	// Path is the input's JSON path in the submission, as the API's
	// field errors name it.
	Path              string
	Placeholder, Mode string // Mode is the inputmode
}

// limitFields are the form's limits, in the order shown.
var limitFields = []field{
	{ID: "timeout", Label: "Timeout", Path: "limits.timeout", Placeholder: "30m", Mode: "text"},
	{ID: "max_steps", Label: "Max steps", Path: "limits.max_steps", Placeholder: "100", Mode: "numeric"},
	{ID: "memory", Label: "Memory", Path: "limits.memory", Placeholder: "2g", Mode: "text"},
	{ID: "cpus", Label: "CPUs", Path: "limits.cpus", Placeholder: "2", Mode: "decimal"},
	{ID: "disk", Label: "Disk", Path: "limits.disk", Placeholder: "10g", Mode: "text"},
}

// NewJob serves the new job form, "/new". Its script (new.js) submits
// it to POST /v1/jobs and shows the API's errors at their fields.
func (u *UI) NewJob(w http.ResponseWriter, r *http.Request, s Session) error {
	return u.render(w, http.StatusOK, "new", pageData{Title: "New job", Nav: "new", Session: s, Scripts: []string{"new.js"},
		Data: struct{ Limits []field }{limitFields}})
}

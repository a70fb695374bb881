package jobs

import (
	"strings"
)

// Problem is what is wrong with one field of a request. Field is the
// field's JSON path in the submission ("task", "limits.memory",
// "repo.url"), or a header's name; Message names the field too, so it
// reads alone.
type Problem struct {
	Field   string
	Message string
}

// Problems collects what is wrong with a request, field by field, so a
// client (the web UI's form) can show each message at its field. As an
// error it wraps its kind (ErrInvalid, ErrOverCeiling, ...) and reads as
// "<kind>: <message>; <message>".
type Problems struct {
	Kind error
	List []Problem
}

// Add records a problem of field.
func (p *Problems) Add(field, message string) {
	p.List = append(p.List, Problem{Field: field, Message: message})
}

// Err returns the problems as an error of kind, or nil if there are none.
func (p Problems) Err(kind error) error {
	if len(p.List) == 0 {
		return nil
	}
	p.Kind = kind
	return &p
}

func (p *Problems) Error() string {
	msgs := make([]string, len(p.List))
	for i, q := range p.List {
		msgs[i] = q.Message
	}
	return p.Kind.Error() + ": " + strings.Join(msgs, "; ")
}

func (p *Problems) Unwrap() error { return p.Kind }

// fieldError is a single problem as an error of kind.
func fieldError(kind error, field, message string) error {
	var p Problems
	p.Add(field, message)
	return p.Err(kind)
}

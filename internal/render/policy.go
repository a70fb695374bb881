package render

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/egress"
)

// policyShown is how many entries of each list PolicyLine names.
const policyShown = 12

// PolicyLine is a job's egress policy on one line, as `agentbox status`
// shows it: "allow pypi.org, *.example.org; deny ads.example.org; presets
// python; secrets github", "open; deny …" or "none".
func PolicyLine(p egress.Policy) string {
	mode := p.Mode
	if mode == "" {
		mode = egress.ModeNone
	}
	var parts []string
	allow := make([]string, len(p.Allow))
	for i, r := range p.Allow {
		allow[i] = r.String()
		if len(r.Methods) > 0 {
			allow[i] += " (" + strings.Join(r.Methods, ", ") + ")"
		}
	}
	deny := make([]string, len(p.Deny))
	for i, r := range p.Deny {
		deny[i] = r.String()
	}
	switch {
	case mode == egress.ModeAllow && len(allow) > 0:
		parts = append(parts, "allow "+list(allow))
	case mode == egress.ModeOpen && len(allow) > 0:
		parts = append(parts, "open", "allow "+list(allow))
	default:
		parts = append(parts, mode)
	}
	for _, l := range []struct {
		name  string
		items []string
	}{{"deny", deny}, {"presets", p.Presets}, {"secrets", p.Secrets}} {
		if len(l.items) > 0 {
			parts = append(parts, l.name+" "+list(l.items))
		}
	}
	return strings.Join(parts, "; ")
}

// list joins items with commas, naming at most policyShown of them.
func list(items []string) string {
	if len(items) <= policyShown {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:policyShown], ", ") + fmt.Sprintf(" and %d more", len(items)-policyShown)
}

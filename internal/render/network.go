package render

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
)

// showNetwork prints one connection through the egress proxy as a line,
// a denial in red when colour is on (and in capitals either way):
//
//	net  allow  GET pypi.example:443 /simple/flask/  12.3 KB in  0.4 s  (allowed by pypi.example)
//	net  DENY   evil.example:443  not in the job's allow list
func (s *Steps) showNetwork(ev event.Network) error {
	line := printable(NetworkLine(ev))
	if s.color && ev.Decision != "allow" {
		line = red + line + reset
	}
	_, err := fmt.Fprintln(s.errw, line)
	return err
}

// NetworkLine is a network event on one line, without colour (see
// showNetwork). Its fields come from the sandbox's requests: the caller
// drops control characters.
func NetworkLine(ev event.Network) string {
	hp := net.JoinHostPort(firstLine(ev.Host, 255), strconv.Itoa(ev.Port))
	times := ""
	if ev.Repeats > 1 {
		times = fmt.Sprintf("%d times", ev.Repeats) // a flood's second of attempts alike
	}
	if ev.Decision != "allow" {
		reason := strings.TrimPrefix(ev.Reason, hp+" is ")
		return "net  DENY   " + hp + prefixed("  ", times) + prefixed("  ", firstLine(reason, 300))
	}
	parts := []string{"net  allow  " + strings.TrimSpace(prefixed("", ev.Method)+" "+hp+prefixed(" ", firstLine(ev.Path, 120)))}
	if times != "" {
		parts = append(parts, times)
	}
	parts = append(parts, Bytes(ev.BytesIn)+" in")
	if ev.BytesOut > 0 {
		parts = append(parts, Bytes(ev.BytesOut)+" out")
	}
	parts = append(parts, strconv.FormatFloat(float64(ev.DurationMS)/1000, 'f', 1, 64)+" s")
	if ev.Secret != "" {
		parts = append(parts, "secret "+ev.Secret)
	}
	if ev.Error != "" {
		parts = append(parts, "failed: "+firstLine(ev.Error, 300))
	}
	if ev.Reason != "" {
		parts = append(parts, "("+firstLine(ev.Reason, 300)+")")
	}
	return strings.Join(parts, "  ")
}

// Bytes is n in the units a person reads: "512 B", "12.3 KB", "4.0 MB"
// (powers of 1024, one decimal).
func Bytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KB"
	for _, u := range []string{"MB", "GB", "TB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}

// policyLine is a change of a job's egress policy on one line:
// "network policy changed by alice: allow a.test, late.test".
func policyLine(ev event.NetworkPolicy) string {
	var p egress.Policy
	summary := "(unreadable policy)"
	if json.Unmarshal(ev.Policy, &p) == nil {
		summary = PolicySummary(p)
	}
	if ev.By == "submit" || ev.By == "" {
		return "network policy: " + summary
	}
	return "network policy changed by " + firstLine(ev.By, 100) + ": " + summary
}

// PolicySummary is a policy in a few words: "none", "allow a.test,
// b.test; deny c.test; presets python; secrets github", "open; deny
// c.test". Each list is cut to its first 20 entries.
func PolicySummary(p egress.Policy) string {
	mode := p.Mode
	if mode == "" {
		mode = egress.ModeNone
		if len(p.Allow) > 0 || len(p.Presets) > 0 || len(p.Secrets) > 0 {
			mode = egress.ModeAllow
		}
	}
	parts := []string{mode + prefixed(" ", rules(p.Allow))}
	for _, l := range []struct{ name, list string }{
		{"deny", rules(p.Deny)}, {"presets", names(p.Presets)}, {"secrets", names(p.Secrets)},
	} {
		if l.list != "" {
			parts = append(parts, l.name+" "+l.list)
		}
	}
	return strings.Join(parts, "; ")
}

func rules(rs []egress.Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
		if len(r.Methods) > 0 {
			s[i] += " (" + strings.Join(r.Methods, ", ") + ")"
		}
	}
	return names(s)
}

// names joins the first 20 of s with commas, saying how many more.
func names(s []string) string {
	const most = 20
	if len(s) > most {
		return strings.Join(s[:most], ", ") + fmt.Sprintf(" and %d more", len(s)-most)
	}
	return strings.Join(s, ", ")
}

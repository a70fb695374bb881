package tools

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
)

// NetworkDenials is what a job's egress proxy refused: the connections it
// denied since a time, oldest first. The job's runner implements it with
// the proxy of the job's sandbox.
type NetworkDenials interface {
	Denied(since time.Time) []event.Network
}

// maxDenialHosts bounds the hosts a result names as refused.
const maxDenialHosts = 5

// withDenials adds to a failed result (a non-zero exit, a timeout, an
// exception) which hosts the egress proxy refused since the call began
// (or whose connection a bound of the job's closed) and why, so that the model changes course instead of retrying a
// connection that can never succeed. A result that did not fail, or a job
// without network (env.Network nil), is returned as it is.
func (env *Env) withDenials(since time.Time, r Result) Result {
	if !r.IsError || env.Network == nil {
		return r
	}
	if note := denialNote(env.Network.Denied(since)); note != "" {
		r.Text = strings.TrimRight(r.Text, "\n") + "\n" + note + "\n"
	}
	return r
}

// denialNote lists the distinct host:port refused, at most
// maxDenialHosts, each with its reason: "The egress proxy refused:
// evil.example:443 (not in the job's allow list)".
func denialNote(evs []event.Network) string {
	seen := map[string]bool{}
	var hosts []string
	more := 0
	for _, ev := range evs {
		if ev.Decision == "allow" && ev.Error == "" {
			continue
		}
		hp := net.JoinHostPort(cut(ev.Host, 255), strconv.Itoa(ev.Port))
		if seen[hp] {
			continue
		}
		seen[hp] = true
		if len(hosts) == maxDenialHosts {
			more++
			continue
		}
		reason := cut(strings.TrimPrefix(ev.Reason, hp+" is "), 200)
		if ev.Decision == "allow" {
			reason = "closed: " + cut(ev.Error, 200) // a bound the job reached
		}
		if reason != "" {
			hp += " (" + reason + ")"
		}
		hosts = append(hosts, hp)
	}
	if len(hosts) == 0 {
		return ""
	}
	note := "The egress proxy refused: " + strings.Join(hosts, ", ")
	if more > 0 {
		note += fmt.Sprintf(" and %d more", more)
	}
	return note + ". Only the job's network policy (or its limits) can let these through; do not retry them."
}

// cut returns s's first line, at most n bytes of it.
func cut(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}

package ui

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
)

// Limits of what one item shows; the whole text is in the event log and
// the API.
const (
	maxShown = 64 << 10 // bytes of one text
)

// item is one event as the timeline shows it, or a step: a tool call and
// what came of it (see stepView). Kind picks its template: step, model,
// notice, condensation, state, message, git, net, info (one line of
// text) or other.
type item struct {
	Seq   int64
	Time  time.Time
	Kind  string
	Title string // a short heading: the tool, the status, the action
	Step  int
	// Text is plain text (a model's message, a notice, a user's message).
	Text string
	// Card is a step's: its call, output and result.
	Card  *stepView
	Cut   bool // the text was cut at maxShown
	Error bool
	// Denied marks a connection the egress proxy refused.
	Denied bool
	// Media are the URLs of a tool result's images.
	Media []string
}

// toItem turns a job's event into its timeline item.
func toItem(ev store.Event) item {
	it := item{Seq: ev.Seq, Time: ev.Time, Kind: "info", Title: ev.Type}
	p, err := event.Decode(ev.Type, ev.Payload)
	if err != nil {
		it.Kind, it.Text = "other", fmt.Sprintf("%s event", ev.Type)
		return it
	}
	switch p := p.(type) {
	case event.Model:
		it.Kind, it.Step, it.Title = "model", p.Step, "model"
		it.Text, it.Cut = cut(strings.TrimSpace(p.Message.PlainText()))
	case event.Notice:
		it.Kind, it.Step, it.Title, it.Text = "notice", p.Step, "notice", p.Text
	case event.Condensation:
		it.Kind, it.Step, it.Title = "condensation", p.Step, "context condensed ("+p.Kind+")"
		it.Text = fmt.Sprintf("Steps %d–%d condensed: %d → %d tokens.", p.FromStep, p.ToStep, p.TokensBefore, p.TokensAfter)
		if p.Reason != "" {
			it.Text += " " + p.Reason
		}
	case event.State:
		it.Kind, it.Title, it.Error = "state", string(p.Status), p.Status == store.StatusError
		it.Text = stateText(p)
	case event.Message:
		it.Kind, it.Title, it.Text = "message", fmt.Sprintf("message (turn %d)", p.Turn), p.Text
	case event.Git:
		it.Kind, it.Title, it.Error = "git", "git "+p.Action, p.Error != ""
		it.Text = gitText(p)
	case event.Sandbox:
		it.Title, it.Text = "sandbox", fmt.Sprintf("Sandbox ready in %d ms.", p.ReadyMS)
		if p.Recovered {
			it.Text = "Sandbox recovered after a restart."
		}
	case event.Log:
		it.Title, it.Text, it.Error = "log", p.Message, p.Level == "error"
	case event.Deleted:
		it.Title, it.Text = "deleted", "The job's workspace was deleted ("+p.Reason+")."
	case event.Checkpoint:
		it.Title, it.Step, it.Error = "checkpoint", p.Step, p.Error != ""
		it.Text = checkpointText(p)
	case event.Network:
		it.Kind, it.Title = "net", "network"
		it.Denied = p.Decision != "allow"
		it.Error = it.Denied || p.Error != ""
		it.Text = networkText(p)
	case event.NetworkPolicy:
		it.Title, it.Text = "network policy", policyText(p)
	}
	return it
}

// cut shortens s to maxShown bytes (on a rune boundary).
func cut(s string) (string, bool) {
	if len(s) <= maxShown {
		return s, false
	}
	n := maxShown
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n], true
}

// mediaURLs are the API's URLs of a tool result's kept images (see
// jobs.Media): the names are the server's own, escaped all the same.
func mediaURLs(jobID string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "/v1/jobs/"+url.PathEscape(jobID)+"/media/"+url.PathEscape(n))
	}
	return out
}

func stateText(p event.State) string {
	var parts []string
	if p.Attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", p.Attempt))
	}
	if p.Reason != "" {
		parts = append(parts, p.Reason)
	}
	if p.Error != "" {
		parts = append(parts, p.Error)
	}
	return strings.Join(parts, " · ")
}

func gitText(p event.Git) string {
	var parts []string
	for _, s := range []string{p.URL, p.Ref, p.Branch, short(p.Commit)} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if p.Error != "" {
		parts = append(parts, "failed: "+p.Error)
	}
	return strings.Join(parts, " · ")
}

func checkpointText(p event.Checkpoint) string {
	tree := p.Tree
	if tree == "git" {
		tree = "git dir"
	}
	if p.Error != "" {
		return fmt.Sprintf("Checkpoint of the %s after step %d failed: %s", tree, p.Step, p.Error)
	}
	return fmt.Sprintf("Checkpoint of the %s after step %d: %d files, %d uploaded (%d bytes) in %d ms.",
		tree, p.Step, p.Files, p.Uploaded, p.UploadedBytes, p.MS)
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// networkText is a connection through the egress proxy on one line:
// "GET pypi.example:443 /simple/ · 12.3 KB in · 0.4 s · allowed by
// pypi.example", or "evil.example:443 · not in the job's allow list".
func networkText(p event.Network) string {
	hp := net.JoinHostPort(p.Host, strconv.Itoa(p.Port))
	times := ""
	if p.Repeats > 1 {
		times = fmt.Sprintf("%d times", p.Repeats) // a flood's second of attempts alike
	}
	if p.Decision != "allow" {
		return strings.Join(nonEmpty(hp, times, strings.TrimPrefix(p.Reason, hp+" is ")), " · ")
	}
	where := strings.Join(nonEmpty(p.Method, hp, p.Path), " ")
	parts := nonEmpty(where, times, render.Bytes(p.BytesIn)+" in")
	if p.BytesOut > 0 {
		parts = append(parts, render.Bytes(p.BytesOut)+" out")
	}
	parts = append(parts, strconv.FormatFloat(float64(p.DurationMS)/1000, 'f', 1, 64)+" s")
	if p.Secret != "" {
		parts = append(parts, "secret "+p.Secret+" added")
	}
	if p.Error != "" {
		parts = append(parts, "failed: "+p.Error)
	}
	return strings.Join(append(parts, nonEmpty(p.Reason)...), " · ")
}

// policyText is a policy change: "Changed by alice: allow a.test".
func policyText(p event.NetworkPolicy) string {
	var pol egress.Policy
	summary := "a policy this page cannot read"
	if json.Unmarshal(p.Policy, &pol) == nil {
		summary = render.PolicySummary(pol)
	}
	if p.By == "" || p.By == "submit" {
		return "Set at submission: " + summary
	}
	return "Changed by " + p.By + ": " + summary
}

func nonEmpty(s ...string) []string {
	return slices.DeleteFunc(s, func(x string) bool { return x == "" })
}

package ui

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
)

// The bounds of the job page's Network section: the events it reads (the
// log's last ones) and the denied hosts it lists.
const (
	maxNetworkScan = 50_000
	maxDeniedHosts = 100
)

// ByUI is who a policy change made on the job page is recorded as made by.
const ByUI = "web UI"

// networkSetter changes a running job's egress policy
// (jobs.Service.UpdateNetwork): fn makes the new policy of the one in
// force, both in one transaction, so a change made meanwhile is extended,
// not lost. A Service without it shows the policy but no "allow for this
// job" buttons.
type networkSetter interface {
	UpdateNetwork(ctx context.Context, id string, fn func(egress.Policy) (egress.Policy, error)) (egress.Policy, error)
}

// networkView is the job page's Network section: the policy in force, as
// the job records it (who changed it last from its network_policy
// events), and the hosts the
// proxy refused that the policy still refuses.
type networkView struct {
	JobID string
	// URL reloads the section; AllowURL takes the "allow for this job"
	// form ("" when the server cannot change a policy).
	URL, AllowURL string
	// Known: a network_policy event was read; else Policy is the default
	// none, as far as the page knows.
	Known     bool
	Policy    egress.Policy
	Summary   string
	ChangedBy string
	Allow     []string
	Deny      []string
	Denied    []deniedHost
	// MoreDenied are denied hosts past maxDeniedHosts; Partial: the log
	// is longer than the events read.
	MoreDenied int
	Partial    bool
	// Connections counts the network events read.
	Connections int
	// Error says why the last "allow" failed, shown with the section.
	Error string
}

// deniedHost is one host:port the proxy refused.
type deniedHost struct {
	Host   string // host:port, as the form posts it back
	Count  int
	Reason string
	// CanAllow: adding Host to the allow list would let it through (it is
	// a valid entry, and no deny entry covers it).
	CanAllow bool
	seq      int64
	addr     netip.Addr
	name     string
	port     int
}

// networkData reads job j's network events into the section, with the
// policy j records (the log's last network_policy event says who set it,
// when it is among the events read; a job that records none, the last
// such event); override, when set, is the policy just put in force (it
// may not be in the log yet). The policy is j's, not the window's: a
// sandbox can push any event out of the window with connection attempts.
func (u *UI) networkData(ctx context.Context, j store.Job, override *egress.Policy) (networkView, error) {
	id := j.ID
	v := u.networkLinks(id)
	after := int64(0)
	if ls, ok := u.svc.(lastSeqer); ok {
		last, err := ls.LastSeq(ctx, id)
		if err != nil {
			return v, err
		}
		after = max(0, last-maxNetworkScan)
		v.Partial = after > 0
	}
	denied, pSeq, err := u.scanNetwork(ctx, id, after, &v)
	if err != nil {
		return v, err
	}
	var recorded egress.Policy
	if len(j.Network) > 0 && json.Unmarshal(j.Network, &recorded) == nil {
		v.Policy, v.Known = recorded, true
	}
	if override != nil {
		v.Policy, v.Known, v.ChangedBy, pSeq = *override, true, ByUI, 1<<62
	}
	v.Policy.Mode = mode(v.Policy)
	v.Summary = render.PolicySummary(v.Policy)
	v.Allow, v.Deny = ruleStrings(v.Policy.Allow), ruleStrings(v.Policy.Deny)
	v.Denied, v.MoreDenied = stillDenied(denied, v.Policy, pSeq)
	return v, nil
}

// networkLinks is the section's URLs, all the job page holds of it until
// its script loads the section (which reads up to maxNetworkScan events:
// the page itself reads only the timeline's last page).
func (u *UI) networkLinks(id string) networkView {
	v := networkView{JobID: id, URL: "/ui/jobs/" + url.PathEscape(id) + "/network"}
	if _, ok := u.svc.(networkSetter); ok {
		v.AllowURL = v.URL + "/allow"
	}
	return v
}

// scanNetwork reads the job's events after seq after, at most
// maxNetworkScan: the last policy (into v) and its seq, and the denials
// by host:port.
func (u *UI) scanNetwork(ctx context.Context, id string, after int64, v *networkView) (map[string]*deniedHost, int64, error) {
	denied := map[string]*deniedHost{}
	var pSeq int64
	for read := 0; read < maxNetworkScan; {
		evs, err := u.svc.Events(ctx, id, after, min(1000, maxNetworkScan-read))
		if err != nil {
			return nil, 0, err
		}
		if len(evs) == 0 {
			break
		}
		read += len(evs)
		after = evs[len(evs)-1].Seq
		for _, e := range evs {
			if p, ok := event.As[event.NetworkPolicy](e.Type, e.Payload); ok {
				var pol egress.Policy
				if json.Unmarshal(p.Policy, &pol) == nil {
					v.Policy, v.Known, v.ChangedBy, pSeq = pol, true, p.By, e.Seq
				}
			} else if n, ok := event.As[event.Network](e.Type, e.Payload); ok {
				v.Connections += max(1, n.Repeats)
				if n.Decision != "allow" {
					addDenial(denied, n, e.Seq)
				}
			}
		}
	}
	return denied, pSeq, nil
}

// addDenial counts a refused connection under its host:port.
func addDenial(denied map[string]*deniedHost, n event.Network, seq int64) {
	host := strings.ToLower(strings.TrimSuffix(n.Host, "."))
	hp := net.JoinHostPort(host, strconv.Itoa(n.Port))
	d := denied[hp]
	if d == nil {
		if len(denied) >= 10*maxDeniedHosts {
			return // a flood of names: the first ones are enough to act on
		}
		d = &deniedHost{Host: hp, name: host, port: n.Port}
		denied[hp] = d
	}
	d.Count += max(1, n.Repeats) // a flood's second of attempts alike, as one event
	d.seq, d.Reason = seq, strings.TrimPrefix(n.Reason, hp+" is ")
	if ap, err := netip.ParseAddrPort(n.Addr); err == nil {
		d.addr = ap.Addr()
	} else if a, err := netip.ParseAddr(n.Addr); err == nil {
		d.addr = a
	}
}

// stillDenied lists the denied hosts most recent first, but those that p,
// put in force (at seq pSeq) after their last denial, lets through: they
// were allowed since. A host p allows that was denied again after p
// stays, with its reason (a private address, say), and no button.
func stillDenied(denied map[string]*deniedHost, p egress.Policy, pSeq int64) ([]deniedHost, int) {
	e := egress.Effective{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
	var out []deniedHost
	for _, d := range denied {
		allowed := e.Decide(d.name, d.addr, d.port, "").Allowed
		if allowed && d.seq < pSeq {
			continue
		}
		r, err := egress.ParseRule(d.Host)
		d.CanAllow = !allowed && err == nil && oneHost(r) && !slices.ContainsFunc(p.Deny, func(r egress.Rule) bool { return r.Matches(d.name, d.addr, d.port) })
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b deniedHost) int { return cmp.Compare(b.seq, a.seq) })
	if len(out) > maxDeniedHosts {
		return out[:maxDeniedHosts], len(out) - maxDeniedHosts
	}
	return out, 0
}

// oneHost says r names one host: a name or a single address, not a "*."
// wildcard or a range. A denied host is the name the sandbox asked the
// proxy for, anything it chose ("*.com", "0.0.0.0/0"); one click on it
// must not allow a world of hosts.
func oneHost(r egress.Rule) bool { return !strings.ContainsAny(r.Host, "*/") }

// mode is p's mode as Check fills it in.
func mode(p egress.Policy) string {
	if p.Mode != "" {
		return p.Mode
	}
	if len(p.Allow) > 0 || len(p.Presets) > 0 || len(p.Secrets) > 0 {
		return egress.ModeAllow
	}
	return egress.ModeNone
}

func ruleStrings(rs []egress.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
		if len(r.Methods) > 0 {
			out[i] += " (" + strings.Join(r.Methods, ", ") + ")"
		}
	}
	return out
}

// Network serves GET /ui/jobs/{id}/network: the job page's Network
// section, for its live refresh; empty for a job whose mode is none and
// that tried no connection (the page hides it).
func (u *UI) Network(w http.ResponseWriter, r *http.Request) error {
	j, err := u.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	v, err := u.networkData(r.Context(), j, nil)
	if err != nil {
		return err
	}
	return u.fragment(w, "job", "network-section", v)
}

// maxAllowForm bounds the "allow for this job" form's body.
const maxAllowForm = 4 << 10

// AllowHost serves POST /ui/jobs/{id}/network/allow, the "allow for this
// job" button of a denied host: host (host:port) is parsed again as a
// policy entry (the form is only the person's choice, never markup or a
// rule as it stands) that must name one host (no wildcard or range),
// added to the allow list of the policy in force (mode none becomes
// allow), read and put in force in one transaction (UpdateNetwork), by
// the request's principal (the API makes it ByUI). It answers the section, re-rendered; a refusal is shown in it.
func (u *UI) AllowHost(w http.ResponseWriter, r *http.Request) error {
	ns, ok := u.svc.(networkSetter)
	if !ok {
		return fmt.Errorf("%w: this server cannot change a job's network policy", store.ErrInvalid)
	}
	id := r.PathValue("id")
	r.Body = http.MaxBytesReader(w, r.Body, maxAllowForm)
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("%w: the form: %v", store.ErrInvalid, err)
	}
	rule, err := egress.ParseRule(r.PostForm.Get("host"))
	if err != nil {
		return fmt.Errorf("%w: host: %v", store.ErrInvalid, err)
	}
	if !oneHost(rule) {
		return fmt.Errorf("%w: host: %s is not one host; allow a wildcard or a range with PATCH /v1/jobs/{id}/network", store.ErrInvalid, rule)
	}
	j, err := u.svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	var refused error // withAllowed's, as it is
	p, err := ns.UpdateNetwork(r.Context(), id, func(cur egress.Policy) (egress.Policy, error) {
		p, err := withAllowed(cur, rule)
		refused = err
		return p, err
	})
	var fe *egress.FieldError
	if errors.As(err, &fe) {
		refused = fe
	}
	if err != nil && refused != nil {
		v, err := u.networkData(r.Context(), j, nil)
		if err != nil {
			return err
		}
		v.Error = "The policy was not changed: " + refused.Error()
		return u.fragment(w, "job", "network-section", v)
	}
	if err != nil {
		return err
	}
	v, err := u.networkData(r.Context(), j, &p)
	if err != nil {
		return err
	}
	return u.fragment(w, "job", "network-section", v)
}

var errDenyBeatsAllow = errors.New("a deny entry covers it, and deny beats allow; change the policy's deny list with PATCH /v1/jobs/{id}/network")

// withAllowed is p with r added to its allow list (once), mode none
// becoming allow. A host a deny entry covers cannot be allowed so.
func withAllowed(p egress.Policy, r egress.Rule) (egress.Policy, error) {
	for _, d := range p.Deny {
		if d.String() == r.String() || (!r.IsIP() && !strings.HasPrefix(r.Host, "*") && d.Matches(r.Host, netip.Addr{}, cmp.Or(r.Port, 443))) {
			return p, fmt.Errorf("%s: %w", r, errDenyBeatsAllow)
		}
	}
	p.Mode = mode(p)
	if p.Mode == egress.ModeNone {
		p.Mode = egress.ModeAllow
	}
	if !slices.ContainsFunc(p.Allow, func(a egress.Rule) bool { return a.String() == r.String() && len(a.Methods) == 0 }) {
		p.Allow = append(slices.Clip(p.Allow), r)
	}
	return p, nil
}

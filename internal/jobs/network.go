package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// ErrBadNetwork means a job's egress policy is refused: an unknown preset
// or secret, a mode the operator forbids, a malformed entry, too many
// entries. It comes as Problems naming the field ("network.presets[0]").
var ErrBadNetwork = errors.New("bad network policy")

// Bounds of a job's network summary (Network): the events it reads and
// the hosts it lists. A sandbox chooses how many connections it tries and
// to how many names, so the summary's cost must not follow it.
const (
	MaxNetworkEvents = 100_000
	MaxNetworkHosts  = 1000
	networkPage      = 1000
)

// netWatchers are the local watchers of jobs' policies (WatchNetwork).
type netWatchers struct {
	mu   sync.Mutex
	next int
	byID map[string]map[int]func(egress.Policy)
}

func (s *Service) egressConfig() *egress.Config {
	if s.egress == nil {
		return &egress.Config{}
	}
	return s.egress
}

// CheckNetwork returns p as a job runs with it (the operator's default
// when p states nothing, Mode filled in), or ErrBadNetwork naming the
// field, under "network.".
func (s *Service) CheckNetwork(p egress.Policy) (egress.Policy, error) {
	out, err := s.egressConfig().Check(p)
	if err != nil {
		return out, NetworkProblem(err)
	}
	return out, nil
}

// NetworkProblem is err, a policy's *egress.FieldError (from Check or from
// decoding one), as an ErrBadNetwork problem of the field "network." +
// its field ("network" alone when it names none). Another error is
// returned as it is.
func NetworkProblem(err error) error {
	var fe *egress.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	field := "network"
	if fe.Field != "" {
		field += "." + fe.Field
	}
	return fieldError(ErrBadNetwork, field, field+": "+fe.Err.Error())
}

// submitNetwork checks a submission's policy and returns it as the job
// records it.
func (s *Service) submitNetwork(req SubmitRequest) (json.RawMessage, error) {
	p, err := s.CheckNetwork(req.Network)
	if err != nil {
		return nil, err
	}
	return encodeNetwork(p)
}

// JobNetwork is the policy in force for j: its recorded one, or mode
// none for a job from before policies.
func JobNetwork(j store.Job) egress.Policy {
	var p egress.Policy
	if len(j.Network) > 0 {
		_ = json.Unmarshal(j.Network, &p) // written by Submit or SetNetwork, after Check
	}
	p.Mode = cmp.Or(p.Mode, egress.ModeNone)
	return p
}

// encodeNetwork is a checked policy as the job records it.
func encodeNetwork(p egress.Policy) (json.RawMessage, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("network policy: %w", err)
	}
	return b, nil
}

// SetNetwork changes job id's egress policy to p, checked as a
// submission's is, and records who did (the caller's Principal, by ctx)
// in a network_policy event, in the same write. Every local watcher of the job
// (WatchNetwork) is called before it returns, so a running proxy applies
// the policy from its next connection. An ended job keeps it for its next
// turn. ErrBadNetwork for a policy refused, store.ErrNotFound for an
// unknown job.
func (s *Service) SetNetwork(ctx context.Context, id string, p egress.Policy) (egress.Policy, error) {
	if _, err := s.CheckNetwork(p); err != nil {
		return p, err
	}
	return s.UpdateNetwork(ctx, id, func(egress.Policy) (egress.Policy, error) { return p, nil })
}

// UpdateNetwork is SetNetwork of the policy fn makes of the job's policy
// in force, read and written in one transaction: a change made meanwhile
// (a PATCH) is what fn extends, never lost. An error of fn's is returned
// as it is, and nothing is changed.
func (s *Service) UpdateNetwork(ctx context.Context, id string, fn func(egress.Policy) (egress.Policy, error)) (egress.Policy, error) {
	by := s.principal(ctx).Name
	var p egress.Policy
	_, _, err := s.store.UpdateJobLogged(ctx, id, func(j *store.Job) ([]store.Entry, error) {
		next, err := fn(JobNetwork(*j))
		if err != nil {
			return nil, err
		}
		if p, err = s.CheckNetwork(next); err != nil {
			return nil, err
		}
		raw, err := encodeNetwork(p)
		if err != nil {
			return nil, err
		}
		j.Network = raw
		return entries(event.NetworkPolicy{By: by, Policy: raw})
	})
	if err != nil {
		if errors.Is(err, ErrBadNetwork) {
			return p, err
		}
		return p, fmt.Errorf("set network of job %s: %w", id, err)
	}
	s.feed.notify(id)
	for _, fn := range s.feed.net.of(id) {
		fn(p)
	}
	return p, nil
}

// WatchNetwork calls fn with the job's new policy each time SetNetwork
// changes it in this process, until stop is called. fn runs in
// SetNetwork's goroutine, before it returns: it must not block.
func (s *Service) WatchNetwork(id string, fn func(egress.Policy)) (stop func()) {
	return s.feed.net.add(id, fn)
}

// add registers fn as a watcher of job id's policy until stop.
func (w *netWatchers) add(id string, fn func(egress.Policy)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[string]map[int]func(egress.Policy){}
	}
	if w.byID[id] == nil {
		w.byID[id] = map[int]func(egress.Policy){}
	}
	w.next++
	n := w.next
	w.byID[id][n] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.byID[id], n)
		if len(w.byID[id]) == 0 {
			delete(w.byID, id)
		}
	}
}

func (w *netWatchers) of(id string) []func(egress.Policy) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]func(egress.Policy), 0, len(w.byID[id]))
	for _, fn := range w.byID[id] {
		out = append(out, fn)
	}
	return out
}

// NetworkSummary is what a job's sandbox did on the network: the policy
// in force and, per host and port, the connections allowed and denied and
// the bytes they carried, from its network events.
type NetworkSummary struct {
	Policy egress.Policy
	Hosts  []HostSummary
	// Connections counts the attempts the network events read stand
	// for (an event may stand for Repeats alike).
	Connections int
	// Truncated says the log holds more than MaxNetworkEvents events (the
	// summary covers the last ones) or the events name more than
	// MaxNetworkHosts hosts (the first ones are listed).
	Truncated bool
}

// HostSummary is one host and port's connections.
type HostSummary struct {
	Host              string
	Port              int
	Allowed, Denied   int
	BytesIn, BytesOut int64
	// LastDecision and LastReason are the latest attempt's.
	LastDecision, LastReason string
}

// Network summarises job id's network events among the last
// MaxNetworkEvents of its log (the latest are what a change of policy
// answers to); store.ErrNotFound for an unknown job.
func (s *Service) Network(ctx context.Context, id string) (NetworkSummary, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return NetworkSummary{}, err
	}
	sum := NetworkSummary{Policy: JobNetwork(j)}
	last, err := s.store.LastSeq(ctx, id)
	if err != nil {
		return sum, fmt.Errorf("network of job %s: %w", id, err)
	}
	after := max(0, last-MaxNetworkEvents)
	sum.Truncated = after > 0
	hosts := map[string]*HostSummary{}
	for after < last {
		evs, err := s.store.Events(ctx, id, after, networkPage)
		if err != nil {
			return sum, fmt.Errorf("network of job %s: %w", id, err)
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
		for _, e := range evs {
			if e.Type == event.TypeNetwork && !sum.count(hosts, e.Payload) {
				sum.Truncated = true
			}
		}
	}
	for _, h := range hosts {
		sum.Hosts = append(sum.Hosts, *h)
	}
	slices.SortFunc(sum.Hosts, func(a, b HostSummary) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
	})
	return sum, nil
}

// count adds one network event to hosts; false when its host is one more
// than MaxNetworkHosts (the event is counted, its host not listed).
func (sum *NetworkSummary) count(hosts map[string]*HostSummary, payload json.RawMessage) bool {
	var n event.Network
	if json.Unmarshal(payload, &n) != nil {
		return true
	}
	times := max(1, n.Repeats) // a flood's second of attempts alike, as one event
	sum.Connections += times
	key := fmt.Sprintf("%s\x00%d", n.Host, n.Port)
	h := hosts[key]
	if h == nil {
		if len(hosts) >= MaxNetworkHosts {
			return false
		}
		h = &HostSummary{Host: n.Host, Port: n.Port}
		hosts[key] = h
	}
	if n.Decision == "allow" {
		h.Allowed += times
	} else {
		h.Denied += times
	}
	h.BytesIn += n.BytesIn
	h.BytesOut += n.BytesOut
	h.LastDecision, h.LastReason = n.Decision, n.Reason
	return true
}

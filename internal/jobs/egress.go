package jobs

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// Egress is what a worker needs to give each job's sandbox its only way
// out: the operator's policy settings and the proxy's options (the job's
// own bytes bound, recorder and broker are added per job).
type Egress struct {
	Config *egress.Config
	// Options is the template of each job's proxy: AllowPrivate,
	// Resolve, Resolver, Conns, Idle, Metrics.
	Options egress.Options
	// UpstreamRoots verify the certificates of the hosts the proxy
	// terminates; nil: the system's. RootsPEM are the operator's own
	// among them (AGENTBOX_EGRESS_CA), which sandboxes trust too.
	UpstreamRoots *x509.CertPool
	RootsPEM      []byte
}

// jobEgress is one attempt's proxy and what follows its policy.
type jobEgress struct {
	*egress.Attached
	cfg    *egress.Config
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// prepareEgress makes the job's broker, so that the sandbox's environment
// (the proxy, the trust bundle, the secrets' placeholders) is known before
// the sandbox is made.
func (s *Scheduler) prepareEgress(j store.Job) (*jobEgress, map[string]string, error) {
	pol := JobNetwork(j)
	a, env, err := egress.Prepare(j.ID, s.cfg.Egress.Config, pol, s.cfg.Egress.UpstreamRoots, s.cfg.Egress.RootsPEM)
	if err != nil {
		return nil, nil, err
	}
	return &jobEgress{Attached: a, cfg: s.cfg.Egress.Config}, env, nil
}

// startEgress starts the job's proxy on sb: each connection is recorded
// as a network event, and the job's policy changes are followed, until
// stop.
func (s *Scheduler) startEgress(ctx context.Context, j store.Job, sb sandbox.Sandbox, je *jobEgress) error {
	pol := JobNetwork(j)
	o := s.cfg.Egress.Options
	if j.Limits.EgressBytes > 0 {
		o.Bytes = j.Limits.EgressBytes
	}
	rec := newNetRecorder(func(ev event.Network) { s.emit(context.WithoutCancel(ctx), j.ID, ev) })
	o.Record = rec.record
	if err := je.Start(ctx, sb.Guest(), j.ID, pol, o, s.log); err != nil {
		return err
	}
	ectx, cancel := context.WithCancel(ctx)
	je.cancel = cancel
	// j was read when the job was claimed, before its sandbox was made: a
	// change made since reached no proxy, and its event is before where
	// the log is followed from. Once changes are followed, the policy in
	// force now is read and applied.
	stopLocal := s.feed.net.add(j.ID, je.SetPolicy)
	after, err := s.store.LastSeq(ctx, j.ID)
	if err != nil {
		s.log.Warn("follow network policy", "job_id", j.ID, "err", err)
	}
	if cur, err := s.store.GetJob(ctx, j.ID); err == nil {
		pol = JobNetwork(cur)
		je.SetPolicy(pol)
	}
	je.done.Add(2)
	go func() {
		defer je.done.Done()
		defer stopLocal()
		s.feed.followPolicy(ectx, j.ID, after, je.SetPolicy)
	}()
	go func() {
		defer je.done.Done()
		rec.run(ectx)
	}()
	if j.Attempts <= 1 && j.Turn <= 1 {
		if b, err := json.Marshal(pol); err == nil {
			s.emit(ctx, j.ID, event.NetworkPolicy{By: "submit", Policy: b})
		}
	}
	return nil
}

// stop ends the proxy, its connections and the followers, and waits.
func (je *jobEgress) stop() {
	if je == nil {
		return
	}
	je.Attached.Stop()
	if je.cancel != nil {
		je.cancel()
		je.done.Wait()
	}
}

// Denied returns the connections the job's proxy refused since t, for a
// tool's result; nil when the job has no proxy.
func (je *jobEgress) Denied(since time.Time) []event.Network {
	if je == nil {
		return nil
	}
	return je.Attached.Denied(since)
}

// followPolicy applies the policy changes another process (an API
// replica) appended to the job's log after seq after: the local ones were
// applied when they were made (Service.WatchNetwork).
func (f *Feed) followPolicy(ctx context.Context, id string, after int64, apply func(egress.Policy)) {
	ch, unsub := f.subscribe(id)
	defer unsub()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
		for {
			evs, err := f.store.Events(ctx, id, after, 500)
			if err != nil || len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				after = ev.Seq
				if pe, ok := event.As[event.NetworkPolicy](ev.Type, ev.Payload); ok && pe.By != "submit" {
					var p egress.Policy
					if json.Unmarshal(pe.Policy, &p) == nil {
						apply(p)
					}
				}
			}
		}
	}
}

// netRecorder writes a job's network events, at most netBurst at once and
// netRate a second after that; past it, attempts alike (host, port,
// decision) are counted and written once a second as one event with
// Repeats, so a sandbox's flood of attempts costs the store a bounded
// number of rows. Past netPending kinds in a second, an allowed attempt
// takes a refused kind's place, and the rest are counted in one event a
// decision whose host is otherHosts: nothing is dropped.
type netRecorder struct {
	write func(event.Network)

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	pending map[netKey]*event.Network
	// others sums, by decision, the attempts that found pending full.
	others map[string]*event.Network
}

type netKey struct {
	host     string
	port     int
	decision string
}

const (
	netRate  = 20
	netBurst = 200
	// netPending bounds the kinds of attempt held for the next summary;
	// the rest are counted under otherHosts.
	netPending = 256
)

func newNetRecorder(write func(event.Network)) *netRecorder {
	return &netRecorder{write: write, tokens: netBurst, last: time.Now(), pending: map[netKey]*event.Network{}}
}

func (r *netRecorder) record(ev event.Network) {
	r.mu.Lock()
	now := time.Now()
	r.tokens = min(netBurst, r.tokens+now.Sub(r.last).Seconds()*netRate)
	r.last = now
	if r.tokens >= 1 {
		r.tokens--
		r.mu.Unlock()
		r.write(ev)
		return
	}
	k := netKey{ev.Host, ev.Port, ev.Decision}
	if p := r.pending[k]; p == nil && len(r.pending) >= netPending {
		// Full: an allowed attempt takes a refused one's place (which
		// joins the count of others), and what has no place is counted
		// with the others, never dropped: a flood of refused names must
		// not hide a connection that went out.
		if ev.Decision == "allow" {
			for dk, d := range r.pending {
				if dk.decision != "allow" {
					delete(r.pending, dk)
					r.addOther(*d)
					break
				}
			}
		}
		if len(r.pending) >= netPending {
			r.addOther(ev)
			r.mu.Unlock()
			return
		}
	}
	addRepeat(r.pending, k, ev)
	r.mu.Unlock()
}

// otherHosts is the host of a summary of the attempts past netPending
// kinds in a second.
const otherHosts = "(other hosts)"

// addOther counts ev (which may itself be a summary) in the summary of
// the attempts of its decision that had no place of their own.
func (r *netRecorder) addOther(ev event.Network) {
	n := max(1, ev.Repeats)
	o := event.Network{Host: otherHosts, Decision: ev.Decision, Protocol: ev.Protocol,
		BytesIn: ev.BytesIn, BytesOut: ev.BytesOut, Repeats: n,
		Reason: "attempts to more hosts in a second than the transcript lists one by one, counted together"}
	if p := r.others[ev.Decision]; p != nil {
		p.Repeats += n
		p.BytesIn += o.BytesIn
		p.BytesOut += o.BytesOut
		return
	}
	if r.others == nil {
		r.others = map[string]*event.Network{}
	}
	r.others[ev.Decision] = &o
}

// addRepeat counts ev under k in pending.
func addRepeat(pending map[netKey]*event.Network, k netKey, ev event.Network) {
	if p := pending[k]; p != nil {
		p.Repeats++
		p.BytesIn += ev.BytesIn
		p.BytesOut += ev.BytesOut
		return
	}
	ev.Repeats = 1
	pending[k] = &ev
}

// run writes the held summaries once a second until ctx ends, then once
// more.
func (r *netRecorder) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.flush()
			return
		case <-t.C:
			r.flush()
		}
	}
}

func (r *netRecorder) flush() {
	r.mu.Lock()
	held, others := r.pending, r.others
	r.pending, r.others = map[netKey]*event.Network{}, nil
	r.mu.Unlock()
	for _, ev := range held {
		r.write(*ev)
	}
	for _, ev := range others {
		r.write(*ev)
	}
}

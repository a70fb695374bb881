package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/internal/event"
)

// Options are a job's proxy's settings besides its policy.
type Options struct {
	Config *Config
	// AllowPrivate are refused ranges the operator opens
	// (AGENTBOX_EGRESS_ALLOW_PRIVATE). Port 25 is never opened.
	AllowPrivate []netip.Prefix
	// Never are agentbox's own listeners (its API): refused whatever
	// AllowPrivate opens, as the API controls every job's policy. An
	// unspecified address (0.0.0.0, ::) stands for every loopback and own
	// address at its port, a loopback one for every loopback address.
	Never []netip.AddrPort
	// Resolve pins names to addresses (AGENTBOX_EGRESS_RESOLVE), checked
	// before DNS.
	Resolve map[string][]netip.Addr
	// Resolver resolves other names; nil: net.DefaultResolver.
	Resolver *net.Resolver
	// Bytes bounds the job's bytes in and out together (limits.egress);
	// 0: 10 GiB.
	Bytes int64
	// Conns bounds the sandbox streams open at once; 0: 64.
	Conns int
	// Idle closes a connection that carried no byte either way for this
	// long; 0: 2 minutes.
	Idle time.Duration
	// DialTimeout bounds resolving and connecting; 0: 10 s.
	DialTimeout time.Duration
	// Record receives every attempt: a denial when it is refused, an
	// allowed one when it ends. It must not block for long.
	Record     func(event.Network)
	Metrics    *Metrics
	Terminator Terminator
}

// Terminator sees inside TLS for the hosts a job's secrets are bound to, or whose allow entry restricts methods.
type Terminator interface {
	Terminate(ctx context.Context, client net.Conn, t Termination) error
}

// Termination is one connection a Terminator takes over.
type Termination struct {
	Host     string
	Port     int
	Secret   string                             // the secret to inject; "" when only methods are restricted
	Upstream net.Conn                           // TCP connection to the checked address, already counted and bounded by the proxy
	Decide   func(method, path string) Decision // the policy for one request; the terminator answers 403 when !Allowed
	Seen     func(method, path string)          // the terminator reports each request it forwards (for the event's method/path)
}

const (
	defaultBytes = 10 << 30
	defaultConns = 64
	// maxRefusing bounds the sandbox streams being told "too many" at once;
	// past it a stream is closed unread.
	maxRefusing = 256
	maxDenials  = 64
)

// Proxy is one job's egress proxy: Serve handles each stream the sandbox
// opens to it, under the job's policy and bounds.
type Proxy struct {
	job      string // whose proxy, for a reader of a stack or a debugger
	o        Options
	guard    *addrGuard
	resolver *net.Resolver
	policy   atomic.Pointer[policyState]

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	closed   bool
	streams  map[*stream]struct{}
	active   int
	refusing int
	wg       sync.WaitGroup

	in, out atomic.Int64
	spent   atomic.Bool // the bytes bound was reached

	// flood counts the attempts refused unread since the last one
	// recorded: a flood is recorded ten times a second at most.
	flood     int
	floodTime time.Time

	dmu     sync.Mutex
	denials []denial // a ring of the last maxDenials
	dnext   int
}

type policyState struct {
	pol Policy
	eff Effective
}

type denial struct {
	at time.Time
	ev event.Network
}

var errClosed = errors.New("the job's egress proxy is closed")

// New makes job's proxy under pol (as Config.Check returned it).
func New(job string, pol Policy, o Options) (*Proxy, error) {
	if o.Config == nil {
		return nil, errors.New("egress: new proxy: no Config")
	}
	o.Bytes = cmpOr(o.Bytes, defaultBytes)
	o.Conns = cmpOr(o.Conns, defaultConns)
	o.Idle = cmpOr(o.Idle, 2*time.Minute)
	o.DialTimeout = cmpOr(o.DialTimeout, 10*time.Second)
	if o.Bytes < 0 || o.Conns < 0 || o.Idle < 0 || o.DialTimeout < 0 {
		return nil, errors.New("egress: new proxy: negative bound")
	}
	pins := make(map[string][]netip.Addr, len(o.Resolve))
	for name, addrs := range o.Resolve {
		pins[normHost(name)] = addrs
	}
	o.Resolve = pins
	p := &Proxy{job: job, o: o, guard: &addrGuard{open: o.AllowPrivate, never: o.Never},
		resolver: o.Resolver, streams: map[*stream]struct{}{}}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.SetPolicy(pol)
	return p, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// SetPolicy puts pol in force for the next connection and the next plain
// HTTP request.
func (p *Proxy) SetPolicy(pol Policy) {
	p.policy.Store(&policyState{pol: pol, eff: p.o.Config.Effective(pol)})
}

// Policy is the policy in force.
func (p *Proxy) Policy() Policy { return p.policy.Load().pol }

func (p *Proxy) effective() Effective { return p.policy.Load().eff }

// Bytes are the job's bytes received from and sent to the outside so far.
func (p *Proxy) Bytes() (in, out int64) { return p.in.Load(), p.out.Load() }

// Denials are the attempts refused since since, oldest first (the last
// 64 at most).
func (p *Proxy) Denials(since time.Time) []event.Network {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	var out []event.Network
	for i := range p.denials {
		d := p.denials[(p.dnext+i)%len(p.denials)]
		if !d.at.Before(since) {
			out = append(out, d.ev)
		}
	}
	return out
}

// Close ends every open connection and waits for their Serve calls;
// Serve after Close refuses.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	open := p.snapshot()
	p.mu.Unlock()
	p.cancel(errClosed)
	for _, s := range open {
		s.close()
	}
	p.wg.Wait()
	return nil
}

func (p *Proxy) snapshot() []*stream {
	open := make([]*stream, 0, len(p.streams))
	for s := range p.streams {
		open = append(open, s)
	}
	return open
}

// Serve handles one stream the sandbox opened until it ends, and closes c.
func (p *Proxy) Serve(c net.Conn) {
	defer c.Close()
	switch p.enter() {
	case admitted:
	case busy:
		defer p.leaveBusy()
		p.refuseBusy(c, fmt.Sprintf("more than %d connections at once", p.o.Conns))
		return
	case closed:
		p.refuseBusy(c, errClosed.Error())
		return
	default: // too busy even to answer
		p.overflow()
		return
	}
	s := p.newStream(c)
	defer p.leave(s)
	first, err := s.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == socksVersion {
		p.serveSOCKS(s)
		return
	}
	p.serveHTTP(s)
}

type admission int

const (
	admitted admission = iota
	busy
	closed
	overflow
)

// enter takes a connection slot.
func (p *Proxy) enter() admission {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		if p.refusing >= maxRefusing {
			return overflow
		}
		return closed
	case p.active < p.o.Conns:
		p.active++
		p.wg.Add(1)
		p.o.Metrics.addActive(1)
		return admitted
	case p.refusing < maxRefusing:
		p.refusing++
		p.wg.Add(1)
		return busy
	}
	return overflow
}

func (p *Proxy) leaveBusy() {
	p.mu.Lock()
	p.refusing--
	p.mu.Unlock()
	p.wg.Done()
}

func (p *Proxy) newStream(c net.Conn) *stream {
	s := &stream{p: p, c: c}
	s.w = newWatch(p.o.Idle, s.idle)
	s.tc = &touchConn{Conn: c, w: s.w}
	s.head = &headLimit{r: s.tc, n: -1}
	s.br = bufio.NewReaderSize(s.head, 4096)
	p.mu.Lock()
	p.streams[s] = struct{}{}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		s.close()
	}
	return s
}

func (p *Proxy) leave(s *stream) {
	s.w.stop()
	s.close()
	p.mu.Lock()
	delete(p.streams, s)
	p.active--
	p.o.Metrics.addActive(-1)
	p.mu.Unlock()
	p.wg.Done()
}

// overflow records a stream closed unread, past both the connection bound
// and the streams being told so: at most one event per 100 ms, naming how
// many went unrecorded before it (the metrics count each).
func (p *Proxy) overflow() {
	p.mu.Lock()
	if time.Since(p.floodTime) < 100*time.Millisecond {
		p.flood++
		p.mu.Unlock()
		p.o.Metrics.attempt("deny")
		return
	}
	n := p.flood
	p.flood, p.floodTime = 0, time.Now()
	p.mu.Unlock()
	reason := fmt.Sprintf("more than %d connections at once", p.o.Conns)
	if n > 0 {
		reason += fmt.Sprintf(" (and %d more attempts refused unrecorded)", n)
	}
	p.record(event.Network{Decision: "deny", Protocol: "unknown", Reason: reason})
}

// bytesReason is why the job's connections were closed and further ones
// refused.
func (p *Proxy) bytesReason() string {
	return fmt.Sprintf("egress bytes bound (%d) reached", p.o.Bytes)
}

// exhaust closes every connection of the job: the bytes bound is reached.
func (p *Proxy) exhaust() {
	if !p.spent.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	open := p.snapshot()
	p.mu.Unlock()
	for _, s := range open {
		s.close()
	}
}

var errBytes = errors.New("egress bytes bound reached")

// budget trims b to the bytes the job may still move; an error when none.
func (p *Proxy) budget(b []byte) ([]byte, error) {
	n, err := p.allowance(int64(len(b)))
	return b[:n], err
}

// allowance is up to want bytes the job may still move; an error when
// none.
func (p *Proxy) allowance(want int64) (int64, error) {
	left := p.o.Bytes - p.in.Load() - p.out.Load()
	if left <= 0 {
		p.exhaust()
		return 0, errBytes
	}
	return min(want, left), nil
}

// record sends ev to Record and the metrics, and keeps a denial, or a
// connection a bound closed, for Denials.
func (p *Proxy) record(ev event.Network) {
	p.o.Metrics.attempt(ev.Decision)
	if ev.Decision == "deny" || (ev.Error != "" && strings.Contains(ev.Error, "bound")) {
		p.dmu.Lock()
		d := denial{at: time.Now(), ev: ev}
		if len(p.denials) < maxDenials {
			p.denials = append(p.denials, d)
		} else {
			p.denials[p.dnext] = d
			p.dnext = (p.dnext + 1) % maxDenials
		}
		p.dmu.Unlock()
	}
	if p.o.Record != nil {
		p.o.Record(ev)
	}
}

// attempt is one connection attempt (one request, for plain HTTP) being
// recorded: exactly one event when it is refused or ends.
type attempt struct {
	p       *Proxy
	ev      event.Network
	start   time.Time
	in, out atomic.Int64
	once    sync.Once
	seenMu  sync.Mutex
}

// begin starts recording an attempt to host, the name as the sandbox
// asked for it: cut to maxHost bytes (a CONNECT's may be 64 KiB), as
// every reader of the job's log holds or shows it.
func (p *Proxy) begin(protocol, host string, port int) *attempt {
	host = strings.ToValidUTF8(capString(host, maxHost), "")
	return &attempt{p: p, start: time.Now(), ev: event.Network{Protocol: protocol, Host: host, Port: port}}
}

// maxHost bounds an event's host: a name has at most 253 bytes;
// maxReason its reason and error.
const (
	maxHost   = 255
	maxReason = 1000
)

// deny records a as refused.
func (a *attempt) deny(r *refusal) {
	a.once.Do(func() {
		a.ev.Decision = "deny"
		if r.allowed {
			a.ev.Decision = "allow"
			a.ev.Error = r.reason
		} else {
			a.ev.Reason = r.reason
			a.ev.Rule = r.rule
		}
		a.emit()
	})
}

// end records a as allowed, ended with err (nil, or how it failed).
func (a *attempt) end(err error) {
	a.once.Do(func() {
		a.ev.Decision = "allow"
		switch {
		case a.p.spent.Load():
			a.ev.Error = a.p.bytesReason()
		case err != nil && a.p.ctx.Err() != nil:
			a.ev.Error = errClosed.Error()
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
			a.ev.Error = err.Error()
		}
		a.emit()
	})
}

func (a *attempt) emit() {
	a.ev.BytesIn, a.ev.BytesOut = a.in.Load(), a.out.Load()
	a.ev.DurationMS = time.Since(a.start).Milliseconds()
	a.seenMu.Lock()
	ev := a.ev
	a.seenMu.Unlock()
	// An error may quote the sandbox (a TLS server name of 64 KiB).
	ev.Error, ev.Reason = capString(ev.Error, maxReason), capString(ev.Reason, maxReason)
	a.p.record(ev)
}

// seen keeps the first request a Terminator reports.
func (a *attempt) seen(method, path string) {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	if a.ev.Method == "" {
		a.ev.Method, a.ev.Path = capString(method, 16), capString(path, maxPath)
	}
}

const maxPath = 512

func capString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

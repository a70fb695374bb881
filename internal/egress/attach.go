package egress

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
)

// ProxyURL is what a sandbox's HTTP_PROXY and HTTPS_PROXY name: the
// guest's loopback listener, whose connections reach the host's proxy.
var ProxyURL = fmt.Sprintf("http://127.0.0.1:%d", guest.EgressPort)

// attachIdle is how many connections a sandbox's pump keeps posted to its
// guest, waiting for a process inside to connect.
const attachIdle = 4

// Attached is a proxy serving one sandbox: its broker (made before the
// sandbox, whose environment names its placeholders and trust bundle),
// then its proxy and the pump that carries the guest's connections to it.
type Attached struct {
	Broker *Broker
	cfg    *Config
	// rootsPEM join the job's CA in the sandbox's trust bundle.
	rootsPEM []byte

	mu     sync.Mutex
	proxy  *Proxy
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Prepare makes the broker of a sandbox for job, whose policy pol is
// checked (Config.Check), returning the environment the sandbox's every command needs: the
// proxy's variables, the trust bundle's and the secrets' placeholders.
// roots verify terminated hosts' certificates (nil: the system's);
// rootsPEM, the operator's own (a private mirror's CA), are trusted inside
// the sandbox too.
func Prepare(job string, cfg *Config, pol Policy, roots *x509.CertPool, rootsPEM []byte) (*Attached, map[string]string, error) {
	b, err := NewBroker(job, cfg.Effective(pol).Secrets, roots)
	if err != nil {
		return nil, nil, fmt.Errorf("egress broker: %w", err)
	}
	env := SandboxEnv(ProxyURL, guest.EgressCABundle)
	maps.Copy(env, b.Placeholders())
	return &Attached{Broker: b, cfg: cfg, rootsPEM: rootsPEM}, env, nil
}

// Start writes the sandbox's trust bundle through g and serves its
// connections under pol (checked) with o (Config and Terminator are set here) until
// Stop. log gets what goes wrong on the way.
func (a *Attached) Start(ctx context.Context, g *guest.Client, job string, pol Policy, o Options, log *slog.Logger) error {
	bundle := append(append([]byte(nil), a.Broker.CAPEM()...), a.rootsPEM...)
	if _, err := g.SetEgressCA(ctx, bundle); err != nil {
		log.Warn("egress trust bundle", "job_id", job, "err", err)
	}
	o.Config, o.Terminator = a.cfg, a.Broker
	p, err := New(job, pol, o)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	ectx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	a.proxy, a.cancel = p, cancel
	a.mu.Unlock()
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		if err := guest.ServeEgress(ectx, g, attachIdle, p.Serve); err != nil && ectx.Err() == nil {
			log.Warn("egress channel", "job_id", job, "err", err)
		}
	}()
	return nil
}

// SetPolicy applies a checked policy to the next connection.
func (a *Attached) SetPolicy(pol Policy) {
	a.mu.Lock()
	p := a.proxy
	a.mu.Unlock()
	if p != nil {
		p.SetPolicy(pol)
	}
	a.Broker.SetSecrets(a.cfg.Effective(pol).Secrets)
}

// Policy is the policy the proxy applies now (the zero Policy before
// Start).
func (a *Attached) Policy() Policy {
	a.mu.Lock()
	p := a.proxy
	a.mu.Unlock()
	if p == nil {
		return Policy{}
	}
	return p.Policy()
}

// Denied returns the connections refused since t (nil before Start).
func (a *Attached) Denied(since time.Time) []event.Network {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	p := a.proxy
	a.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Denials(since)
}

// Stop ends the proxy, its connections and its pump, and waits for them.
func (a *Attached) Stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	p, cancel := a.proxy, a.cancel
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	p.Close()
	a.done.Wait()
}

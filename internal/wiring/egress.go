package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/render"
)

// newEgress is the workers' egress settings from cfg; reg, if set,
// receives the proxies' metrics; server, if set, is the server's own
// listener, which no sandbox may reach whatever AGENTBOX_EGRESS_ALLOW_PRIVATE
// opens.
func newEgress(cfg config.Config, reg prometheus.Registerer, server net.Addr) (*jobs.Egress, error) {
	l, err := loadEgress(cfg)
	if err != nil {
		return nil, err
	}
	e := &jobs.Egress{Config: l.Policy, Options: egressOptions(cfg, l),
		UpstreamRoots: l.Roots, RootsPEM: l.RootsPEM}
	if ap, ok := listenAddrPort(fmt.Sprint(server)); server != nil && ok {
		e.Options.Never = append(e.Options.Never, ap)
	}
	if reg != nil {
		e.Options.Metrics = egress.NewMetrics(reg)
	}
	return e, nil
}

// egressOptions are the proxy's options from cfg and its egress settings
// l, without the recorder.
// The server's configured address (AGENTBOX_ADDR) is never reached: a
// server of this machine's, for exec and chat.
func egressOptions(cfg config.Config, l egress.Loaded) egress.Options {
	e := cfg.Egress
	o := egress.Options{AllowPrivate: l.AllowPrivate, Resolve: l.Resolve, Bytes: e.Bytes, Conns: e.Conns, Idle: e.Idle}
	if ap, ok := listenAddrPort(cfg.Server.Addr); ok {
		o.Never = []netip.AddrPort{ap}
	}
	return o
}

// listenAddrPort reads a listen address: an IP and port, "localhost"
// as 127.0.0.1, no host (":8080") as every address.
func listenAddrPort(s string) (netip.AddrPort, bool) {
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1 || n > 65535 {
		return netip.AddrPort{}, false
	}
	a := netip.IPv4Unspecified()
	switch host {
	case "":
	case "localhost":
		a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, false
		}
	}
	return netip.AddrPortFrom(a.WithZone(""), uint16(n)), true
}

// LocalEgress is the way out of a sandbox agentbox makes outside a job
// (exec, chat): its own egress proxy under a checked policy. Prepare
// before the sandbox is made, Start once it runs, Stop at the end.
type LocalEgress struct {
	cfg  config.Config
	eg   egress.Loaded
	pol  egress.Policy
	name string
	say  io.Writer
	log  *slog.Logger
	a    *egress.Attached
}

// NewLocalEgress checks pol against cfg's settings. Each refused
// connection is said on say as it happens (nil: not said); name names
// the proxy in log's messages.
func NewLocalEgress(cfg config.Config, name string, pol egress.Policy, say io.Writer, log *slog.Logger) (*LocalEgress, error) {
	eg, err := loadEgress(cfg)
	if err != nil {
		return nil, err
	}
	if pol, err = eg.Policy.Check(pol); err != nil {
		return nil, err
	}
	return &LocalEgress{cfg: cfg, eg: eg, pol: pol, name: name, say: say, log: log}, nil
}

// Prepare returns what the sandbox's environment needs: the proxy's
// variables, the trust bundle's, the secrets' placeholders.
func (l *LocalEgress) Prepare() (map[string]string, error) {
	a, env, err := egress.Prepare(l.name, l.eg.Policy, l.pol, l.eg.Roots, l.eg.RootsPEM)
	if err != nil {
		return nil, err
	}
	l.a = a
	return env, nil
}

// Start serves the sandbox's connections through g.
func (l *LocalEgress) Start(ctx context.Context, g *guest.Client) error {
	o := egressOptions(l.cfg, l.eg)
	if w := l.say; w != nil {
		o.Record = func(ev event.Network) {
			if ev.Decision == "deny" || ev.Error != "" {
				line := strings.Map(func(r rune) rune {
					if unicode.IsControl(r) {
						return -1
					}
					return r
				}, render.NetworkLine(ev))
				fmt.Fprintln(w, "agentbox: "+line)
			}
		}
	}
	return l.a.Start(ctx, g, l.name, l.pol, o, l.log)
}

// Effective is the policy with its presets and secrets expanded, for the
// system prompt.
func (l *LocalEgress) Effective() egress.Effective { return l.eg.Policy.Effective(l.pol) }

// Denied returns the connections refused since t.
func (l *LocalEgress) Denied(since time.Time) []event.Network { return l.a.Denied(since) }

// Stop ends the proxy; it never fails.
func (l *LocalEgress) Stop() error {
	if l != nil {
		l.a.Stop()
	}
	return nil
}

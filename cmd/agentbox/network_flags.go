package main

import (
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/wiring"
)

// networkHelp is what the network flags' help adds to a command's.
const networkHelp = `

The sandbox reaches the network only through agentbox's egress proxy, under
the policy these flags state: --allow HOST lets it reach a host (a name,
*.domain, an IP or CIDR, with an optional :port; 80 and 443 without one),
--deny HOST refuses one whatever else allows it, --preset NAME adds a list of
hosts the operator defines (AGENTBOX_EGRESS_PRESETS), --secret NAME lets the
proxy add a credential the operator binds to its hosts
(AGENTBOX_EGRESS_SECRETS; the sandbox sees only a placeholder). --network
open reaches any public host but those denied; --network none nothing.
Without any of them the operator's default applies (AGENTBOX_EGRESS_DEFAULT,
else none). A policy the operator does not allow (an unknown preset or
secret, a forbidden mode) is refused.`

// addNetworkFlags adds --allow, --deny, --preset and --secret, and with
// mode --network none|open, to fl.
func addNetworkFlags(fl *pflag.FlagSet, f *wiring.NetworkFlags, mode bool) {
	fl.StringArrayVar(&f.Allow, "allow", nil, "let the sandbox reach HOST[:PORT] (a name, *.domain, IP or CIDR; repeatable)")
	fl.StringArrayVar(&f.Deny, "deny", nil, "refuse HOST[:PORT] whatever else allows it (repeatable)")
	fl.StringArrayVar(&f.Presets, "preset", nil, "allow the hosts of the operator's preset NAME, e.g. python (repeatable)")
	fl.StringArrayVar(&f.Secrets, "secret", nil, "let the egress proxy add the operator's secret NAME to requests to its hosts (repeatable)")
	if mode {
		fl.StringVar(&f.Mode, "network", "", "egress mode: none (reach nothing) or open (any public host but those denied); --allow, --preset and --secret imply allow")
	}
}

package event

import "encoding/json"

// The network's event types (issue 26): one per connection a sandbox made
// or tried through the egress proxy, and one per change of a job's policy.
const (
	TypeNetwork       = "network"
	TypeNetworkPolicy = "network_policy"
)

// Network is one connection attempt through a job's egress proxy: where it
// went, what the proxy decided and why, and what it carried. A denied
// attempt is recorded when it is refused; an allowed one when it ends.
type Network struct {
	// Addr is the address the proxy connected to (or would have), after
	// resolving Host; empty when the name was refused before resolving.
	Addr     string `json:"addr,omitempty"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
	// Decision is "allow" or "deny".
	Decision   string `json:"decision"`
	DurationMS int64  `json:"duration_ms"`
	// Error says how an allowed connection failed (the upstream refused,
	// a bound closed it); empty when it ended normally.
	Error string `json:"error,omitempty"`
	Host  string `json:"host"`
	// Method and Path are the HTTP request's where the proxy sees them
	// (plain HTTP, and the hosts it terminates).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Port   int    `json:"port"`
	// Protocol is how the sandbox asked: "http" (a forwarded request),
	// "connect" (HTTPS through CONNECT) or "socks5".
	Protocol string `json:"protocol"`
	// Reason says why in words: the rule that allowed it, or why it was
	// refused ("not in the allow list", "private address 10.0.0.1", ...).
	Reason string `json:"reason,omitempty"`
	// Repeats, when above 1, says this event stands for that many
	// attempts alike (same host, port and decision) within a second: a
	// job's flood of attempts is recorded in bounded space.
	Repeats int `json:"repeats,omitempty"`
	// Rule is the policy entry that decided, as written; empty for a
	// refusal no entry can lift (a private address, port 25).
	Rule string `json:"rule,omitempty"`
	// Secret names the secret whose header the proxy added.
	Secret string `json:"secret,omitempty"`
}

// NetworkPolicy records a job's egress policy being set (at the start of
// its first run) or changed (PATCH /v1/jobs/{id}/network), and who did it.
type NetworkPolicy struct {
	// By is who changed it: "submit" for the job's own, else the API
	// caller's name.
	By string `json:"by"`
	// Policy is the policy now in force, as the API returns it (an
	// egress.Policy).
	Policy json.RawMessage `json:"policy"`
}

func (Network) EventType() string { return TypeNetwork }

func (NetworkPolicy) EventType() string { return TypeNetworkPolicy }

package egress

import "github.com/agentbox/agentbox/internal/netpolicy"

// The policy's types and functions are netpolicy's (a leaf, which the
// API's wire types carry); these names keep the proxy's code and its
// callers in this package's terms.
type (
	// Policy is netpolicy.Policy: a job's egress policy as it states it.
	Policy = netpolicy.Policy
	// Rule is netpolicy.Rule: one allow or deny entry.
	Rule = netpolicy.Rule
	// Secret is netpolicy.Secret: a credential bound to hosts.
	Secret = netpolicy.Secret
	// Config is netpolicy.Config: the operator's presets, secrets, modes
	// and default policy.
	Config = netpolicy.Config
	// FieldError is netpolicy.FieldError: a bad policy, with its field.
	FieldError = netpolicy.FieldError
	// Effective is netpolicy.Effective: a checked policy, expanded.
	Effective = netpolicy.Effective
	// Decision is netpolicy.Decision: what the policy says of one
	// connection.
	Decision = netpolicy.Decision
)

// The modes of a policy (netpolicy's).
const (
	ModeNone  = netpolicy.ModeNone
	ModeAllow = netpolicy.ModeAllow
	ModeOpen  = netpolicy.ModeOpen
)

// MaxEntries is netpolicy.MaxEntries.
const MaxEntries = netpolicy.MaxEntries

// Modes are every mode, in the order the docs list them.
var Modes = netpolicy.Modes

// ParseRule is netpolicy.ParseRule.
func ParseRule(s string) (Rule, error) { return netpolicy.ParseRule(s) }

package jobs

import "context"

// Principal is who calls the Service. Today the API tells its callers
// apart by the way they come in, not by who they are: its bearer token
// ("api": tokens have no names), the web UI's session ("ui"), a click on
// the UI's job page (ui.ByUI); agentbox itself (the CLI's local mode, the
// scheduler, the janitor) calls with none. Issue 29 (users and roles)
// gives it a user and roles.
//
// It rides on the context of each call (WithPrincipal), put there by the
// API's auth middleware once a request's credentials are checked, so that
// every Service method takes it with its ctx, whoever the handler, and
// reads it in one place (Service.principal), where the rules of who may
// do what go. What a Service method records as done by someone (a
// network_policy event's "by") is the principal's Name.
type Principal struct {
	Name string
}

// principalKey is the context key of a Principal.
type principalKey struct{}

// WithPrincipal returns ctx carrying p as the caller of the Service
// methods it is given to.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf is the principal ctx carries; ok is false when it carries
// none (agentbox calling itself).
func PrincipalOf(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// principal is the caller of a Service method, by ctx: the one place
// where the rules of who may do what are to be applied. A call with no
// principal is agentbox's own, or the API's before principals (named
// "api", as a bearer token's calls).
func (s *Service) principal(ctx context.Context) Principal {
	p, ok := PrincipalOf(ctx)
	if !ok || p.Name == "" {
		return Principal{Name: "api"}
	}
	return p
}

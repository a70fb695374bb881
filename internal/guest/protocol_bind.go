package guest

import (
	"context"
	"net/http"
)

// BindRequest is the body of POST /bind: what ties a sandbox made before
// its job (sandbox.Binder) to that job inside the guest. A guest is bound
// at most once, before anything else uses it; its command line may bind it
// instead (--web-base, the container's environment).
type BindRequest struct {
	// Env is added to the environment of every command run after the bind.
	Env map[string]string `json:"env,omitempty"`
	// WebBase is the URL path under which the host serves the sandbox's
	// web services, as the daemon's --web-base flag.
	WebBase string `json:"web_base,omitempty"`
}

// Bind binds the guest to its job: POST /bind.
func (c *Client) Bind(ctx context.Context, req BindRequest) error {
	var out struct{}
	return c.doJSON(ctx, http.MethodPost, "/bind", nil, req, &out)
}

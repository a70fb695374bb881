package guest

import (
	"context"
	"net/http"
	"time"
)

// desktopCallTimeout bounds a desktop call: starting the display stack takes
// a few seconds, an action at most its own duration.
const desktopCallTimeout = 2 * time.Minute

// DesktopStart starts the desktop stack (display, window manager, VNC,
// noVNC) if it is not running, and describes the display.
func (c *Client) DesktopStart(ctx context.Context) (DesktopInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, desktopCallTimeout)
	defer cancel()
	var info DesktopInfo
	err := c.doJSON(ctx, http.MethodPost, "/desktop/start", nil, struct{}{}, &info)
	return info, err
}

// Desktop performs one action on the sandbox's display, starting the
// desktop first if needed.
func (c *Client) Desktop(ctx context.Context, a DesktopAction) (DesktopResult, error) {
	ctx, cancel := context.WithTimeout(ctx, desktopCallTimeout)
	defer cancel()
	var res DesktopResult
	err := c.doJSON(ctx, http.MethodPost, "/desktop/action", nil, a, &res)
	return res, err
}

// KernelExecute runs code in the persistent Jupyter kernel, starting the
// notebook server and kernel first if needed.
func (c *Client) KernelExecute(ctx context.Context, req KernelRequest) (KernelResult, error) {
	timeout := DefaultExecTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	// Besides the code's own timeout, the guest may start the notebook
	// server and kernel before it, and interrupt the code and restart the
	// kernel after it; the margin covers both.
	ctx, cancel := context.WithTimeout(ctx, timeout+KernelCallMargin)
	defer cancel()
	var res KernelResult
	err := c.doJSON(ctx, http.MethodPost, "/kernel/execute", nil, req, &res, 3*DefaultMaxOutput)
	return res, err
}

// Transport is the client's connection to the guest, for a reverse proxy
// to /proxy/{service}/...; requests may use any host name.
func (c *Client) Transport() http.RoundTripper { return c.http.Transport }

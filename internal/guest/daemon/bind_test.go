package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
)

// TestBind: POST /bind gives an unbound guest its job's environment and
// web base (the desktop's root sends noVNC under it); a second bind, and
// one of a guest whose command line gave a web base, are refused; a bad
// web base is refused.
func TestBind(t *testing.T) {
	ctx := context.Background()
	c, _ := start(t)
	if err := c.Bind(ctx, guest.BindRequest{WebBase: "/v1/jobs/x/../y"}); !errors.Is(err, guest.ErrBadRequest) {
		t.Fatalf("bad web base: %v, want ErrBadRequest", err)
	}
	if err := c.Bind(ctx, guest.BindRequest{Env: map[string]string{"JOB_ENV": "bound"}, WebBase: "/v1/jobs/j9"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if got := strings.TrimSpace(string(sh(t, c, "echo $JOB_ENV").Stdout)); got != "bound" {
		t.Errorf("env after bind: %q", got)
	}
	hc := &http.Client{Transport: c.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get("http://guest/proxy/desktop/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, "path=v1/jobs/j9/desktop/websockify") {
		t.Errorf("desktop root after bind redirects to %q", loc)
	}
	if err := c.Bind(ctx, guest.BindRequest{WebBase: "/v1/jobs/j10"}); err == nil {
		t.Errorf("a second bind succeeded")
	}
	bound, _ := start(t, func(cfg *daemon.Config) { cfg.WebBase = "/v1/jobs/j1" })
	if err := bound.Bind(ctx, guest.BindRequest{WebBase: "/v1/jobs/j2"}); err == nil {
		t.Errorf("binding a guest its command line bound succeeded")
	}
}

// TestBindRefusedWhenBoundAtCreate: a guest bound at create with no web
// base (a job's sandbox: Config.Bound, --bound) refuses POST /bind, which
// any process in its sandbox can reach, and keeps its environment.
func TestBindRefusedWhenBoundAtCreate(t *testing.T) {
	c, _ := start(t, func(cfg *daemon.Config) { cfg.Bound = true })
	if err := c.Bind(context.Background(), guest.BindRequest{Env: map[string]string{"PLANTED": "yes"}}); !errors.Is(err, guest.ErrExists) {
		t.Errorf("bind of a guest bound at create: %v, want ErrExists", err)
	}
	if got := strings.TrimSpace(string(sh(t, c, "echo ${PLANTED:-unset}").Stdout)); got != "unset" {
		t.Errorf("env after a refused bind: PLANTED=%q", got)
	}
}

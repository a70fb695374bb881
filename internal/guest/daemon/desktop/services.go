package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

// Internal names of the supervised programs. ServiceDesktop is the group of
// the first four; ServiceJupyter is a service of its own.
const (
	svcXvfb  = "xvfb"
	svcWM    = "wm"
	svcVNC   = "vnc"
	svcNoVNC = "novnc"
)

// Loopback addresses the web services listen on.
const (
	vncAddr     = "127.0.0.1:5900"
	noVNCAddr   = "127.0.0.1:6080"
	jupyterAddr = "127.0.0.1:8888"
)

// newServiceSupervisor returns the supervisor of the sandbox's desktop and
// Jupyter services.
func (s *Server) newServiceSupervisor() *supervisor {
	cfg := supervisorConfig{
		Log:     s.log,
		Environ: func() ([]string, error) { return s.env(nil) },
		Dir:     s.cfg.Workspace,
		Groups:  map[string][]string{ServiceDesktop: {svcXvfb, svcWM, svcVNC, svcNoVNC}},
	}
	return newSupervisor(cfg, s.serviceSpecs()...)
}

// serviceSpecs describes the services: an X server on Display, openbox,
// x11vnc and noVNC (websockify) on top of it, and the Jupyter notebook
// server. All listen on loopback only; the host reaches the web ones
// through the guest's proxy.
func (s *Server) serviceSpecs() []*serviceSpec {
	size := fmt.Sprintf("%dx%dx24", s.cfg.DisplayWidth, s.cfg.DisplayHeight)
	return []*serviceSpec{{
		name:    svcXvfb,
		argv:    []string{"Xvfb", Display, "-screen", "0", size, "-nolisten", "tcp", "-noreset"},
		setup:   makeX11Dir,
		ready:   xReady,
		recheck: true,
	}, {
		name:  svcWM,
		deps:  []string{svcXvfb},
		argv:  []string{"openbox"},
		ready: wmReady,
	}, {
		name: svcVNC,
		deps: []string{svcXvfb},
		argv: []string{"x11vnc", "-display", Display, "-localhost", "-noipv6", "-rfbport", portOf(vncAddr),
			"-forever", "-shared", "-nopw", "-quiet", "-xkb"},
		ready: func(ctx context.Context) error { return dialUp(ctx, "tcp", vncAddr) },
	}, {
		name:  svcNoVNC,
		deps:  []string{svcVNC, svcWM},
		argv:  []string{"websockify", "--web", "/usr/share/novnc", noVNCAddr, vncAddr},
		ready: func(ctx context.Context) error { return dialUp(ctx, "tcp", noVNCAddr) },
	}, {
		name:    ServiceJupyter,
		argv:    s.jupyterArgv(),
		ready:   s.jupyterReady,
		recheck: true,
	}}
}

// jupyterArgv runs the notebook server for the kernel API and the proxy:
// no browser, no token or password (the host authenticates, and only the
// guest's proxy reaches it), no XSRF check (API clients carry no cookie),
// and a base URL matching the path the host serves it under. The proxy
// rewrites Host and Origin to the server's own address, so its
// local-host and same-origin checks pass without loosening them.
func (s *Server) jupyterArgv() []string {
	return []string{"jupyter", "notebook", "--no-browser",
		"--ip=127.0.0.1", "--port=" + portOf(jupyterAddr), "--port-retries=0",
		"--NotebookApp.token=", "--NotebookApp.password=",
		"--NotebookApp.disable_check_xsrf=True", "--NotebookApp.quit_button=False",
		// The guest caps output itself; the server's default 1 MB/s limit
		// would drop a fast print's output entirely. The limit stays finite
		// so that a huge print is dropped, with the server's "IOPub data
		// rate exceeded" notice, rather than relayed as one WebSocket
		// message over jupyterReadLimit, which breaks the connection and
		// costs the kernel. Averaged over the server's 3 s window, 5e6
		// bytes a second lets through stream messages of up to 15 MB,
		// which the server relays as JSON of at most three times that
		// (non-ASCII characters escaped): 45 MB. Only stream output counts.
		"--NotebookApp.iopub_data_rate_limit=5.0e6", "--NotebookApp.iopub_msg_rate_limit=1.0e10",
		"--NotebookApp.base_url=" + s.cfg.WebBase + "/jupyter/",
		"--notebook-dir=" + s.cfg.Workspace,
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// makeX11Dir creates the X sockets' directory, world-writable and sticky as
// X expects; the X server cannot create it without root.
func makeX11Dir() error {
	const dir = "/tmp/.X11-unix"
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm() == 0o777 {
		return err
	}
	return os.Chmod(dir, 0o777|os.ModeSticky)
}

// dialUp reports whether something accepts connections at addr.
func dialUp(ctx context.Context, network, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// The probes of services that are checked on every ensure talk their
// protocol rather than only connect: a process being killed still has its
// listening socket accept for a moment, but never answers again.

// xReady reports whether the X server completes a connection setup.
func xReady(ctx context.Context) error {
	x, err := dialX(ctx, Display)
	if err != nil {
		return err
	}
	return x.Close()
}

// jupyterReady reports whether the notebook server answers its API.
func (s *Server) jupyterReady(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.jupyterURL()+"api", nil)
	if err != nil {
		return err
	}
	resp, err := s.tr.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jupyter answered %s", resp.Status)
	}
	return nil
}

// wmReady reports whether a window manager has announced itself on the
// display (the EWMH _NET_SUPPORTING_WM_CHECK property of the root window),
// so windows opened next are managed and focused.
func wmReady(ctx context.Context) error {
	x, err := dialX(ctx, Display)
	if err != nil {
		return err
	}
	defer x.Close()
	atom, err := x.atom("_NET_SUPPORTING_WM_CHECK")
	if err != nil {
		return err
	}
	if atom != 0 {
		if v, err := x.property(atom); err != nil || len(v) > 0 {
			return err
		}
	}
	return errors.New("no window manager on " + Display + " yet")
}

// defaultTargets are where the proxy sends each web service's requests.
func (s *Server) defaultTargets() map[string]proxyTarget {
	return map[string]proxyTarget{
		ServiceDesktop: {addr: noVNCAddr, prefix: "/"},
		ServiceJupyter: {addr: jupyterAddr, prefix: s.cfg.WebBase + "/jupyter/"},
	}
}

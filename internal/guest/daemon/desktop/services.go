package desktop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// Internal names of the supervised programs; guest.ServiceDesktop is the
// group of them all.
const (
	svcXvfb  = "xvfb"
	svcWM    = "wm"
	svcVNC   = "vnc"
	svcNoVNC = "novnc"
)

// Loopback addresses the desktop's servers listen on.
const (
	vncAddr = "127.0.0.1:5900"
	// NoVNCAddr is where noVNC (websockify) listens: the guest's proxy
	// sends guest.ServiceDesktop's requests there.
	NoVNCAddr = "127.0.0.1:6080"
)

// Services describes the desktop's programs for the supervisor: an X server
// on guest.Display with a width×height screen, openbox, and x11vnc and
// noVNC (websockify) on top of it. All listen on loopback only; the host
// reaches noVNC through the guest's proxy. Ensuring guest.ServiceDesktop, a
// group of them all, starts the desktop.
func Services(width, height int) []*supervise.Spec {
	size := fmt.Sprintf("%dx%dx24", width, height)
	return []*supervise.Spec{{
		Name:    svcXvfb,
		Argv:    []string{"Xvfb", guest.Display, "-screen", "0", size, "-nolisten", "tcp", "-noreset"},
		Setup:   makeX11Dir,
		Ready:   xReady,
		Recheck: true,
	}, {
		Name:  svcWM,
		Deps:  []string{svcXvfb},
		Argv:  []string{"openbox"},
		Ready: wmReady,
	}, {
		Name: svcVNC,
		Deps: []string{svcXvfb},
		Argv: []string{"x11vnc", "-display", guest.Display, "-localhost", "-noipv6", "-rfbport", portOf(vncAddr),
			"-forever", "-shared", "-nopw", "-quiet", "-xkb"},
		Ready: func(ctx context.Context) error { return dialUp(ctx, "tcp", vncAddr) },
	}, {
		Name:  svcNoVNC,
		Deps:  []string{svcVNC, svcWM},
		Argv:  []string{"websockify", "--web", "/usr/share/novnc", NoVNCAddr, vncAddr},
		Ready: func(ctx context.Context) error { return dialUp(ctx, "tcp", NoVNCAddr) },
	}}
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

// The probes of services that are checked on every Ensure talk their
// protocol rather than only connect: a process being killed still has its
// listening socket accept for a moment, but never answers again.

// xReady reports whether the X server completes a connection setup.
func xReady(ctx context.Context) error {
	x, err := dialX(ctx, guest.Display)
	if err != nil {
		return err
	}
	return x.Close()
}

// wmReady reports whether a window manager has announced itself on the
// display (the EWMH _NET_SUPPORTING_WM_CHECK property of the root window),
// so windows opened next are managed and focused.
func wmReady(ctx context.Context) error {
	x, err := dialX(ctx, guest.Display)
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
	return errors.New("no window manager on " + guest.Display + " yet")
}

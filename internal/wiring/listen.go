package wiring

import (
	"fmt"
	"log/slog"
	"net"
	"syscall"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/connlimit"
)

// listen listens on addr for serve, within the connection bounds of h:
// per client address, and in all, at most half the process's open-file
// limit, so that a flood of connections leaves files for the store, the
// workspaces and the sandboxes' sockets; and each write within h's write
// timeout, so that a client that stops reading does not hold its place.
func listen(addr string, h config.HTTP, log *slog.Logger) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	total := h.MaxConns
	if half := openFileLimit() / 2; half > 0 && half < total {
		log.Warn("http: fewer connections than AGENTBOX_HTTP_MAX_CONNS, as the open-file limit is low", "max_conns", half, "nofile", half*2)
		total = half
	}
	return connlimit.New(l, connlimit.Config{PerAddr: h.MaxConnsPerAddr, Total: total, WriteTimeout: h.WriteTimeout, Log: log}), nil
}

// openFileLimit is the process's RLIMIT_NOFILE (Go raises the soft limit
// to the hard one at start), or 0 if it cannot be read.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}

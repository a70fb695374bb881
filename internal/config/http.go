package config

import (
	"errors"
	"fmt"
	"time"
)

// HTTP bounds what one client's connections to `agentbox serve` may cost
// the host, before and after auth: how long each phase of a request may
// take, and how many connections one address, and all together, may hold.
type HTTP struct {
	// HeaderTimeout is how long a request's headers may take to arrive
	// (AGENTBOX_HTTP_HEADER_TIMEOUT, default 10s).
	HeaderTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request (AGENTBOX_HTTP_IDLE_TIMEOUT, default 2m).
	IdleTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive, from
	// the end of its headers (AGENTBOX_HTTP_BODY_TIMEOUT, default 30s).
	// Requests without a body (event streams, downloads, WebSockets) are
	// not bounded by it.
	BodyTimeout time.Duration
	// MinUploadRate is the average rate, in bytes a second, an upload (a
	// multipart submission's workspace, a file sent to a job's Jupyter)
	// must keep up after its first BodyTimeout, in place of BodyTimeout;
	// no pause may last longer than BodyTimeout either
	// (AGENTBOX_HTTP_MIN_UPLOAD_RATE, default 32k).
	MinUploadRate int64
	// WriteTimeout is how long each write to a client may wait for it to
	// read: a response, an event stream or a WebSocket whose client stops
	// reading for that long is cut, and its connection closed
	// (AGENTBOX_HTTP_WRITE_TIMEOUT, default 60s). Streams and downloads
	// that keep being read last as long as they take.
	WriteTimeout time.Duration
	// MaxConnsPerAddr bounds the connections one client address holds at
	// once, an IPv6 address counted by its /64 (AGENTBOX_HTTP_MAX_CONNS_PER_ADDR,
	// default 128; 0: no bound, for a server only a reverse proxy reaches).
	MaxConnsPerAddr int
	// MaxConns bounds the connections all clients hold at once
	// (AGENTBOX_HTTP_MAX_CONNS, default 4096); serve lowers it to half its
	// open-file limit.
	MaxConns int
}

// Validate checks the HTTP bounds.
func (h HTTP) Validate() error {
	var errs []error
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"AGENTBOX_HTTP_HEADER_TIMEOUT", h.HeaderTimeout}, {"AGENTBOX_HTTP_IDLE_TIMEOUT", h.IdleTimeout}, {"AGENTBOX_HTTP_BODY_TIMEOUT", h.BodyTimeout},
		{"AGENTBOX_HTTP_WRITE_TIMEOUT", h.WriteTimeout}} {
		if d.d < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("%s %v: at least 100ms", d.key, d.d))
		}
	}
	if h.MinUploadRate < 1 {
		errs = append(errs, fmt.Errorf("AGENTBOX_HTTP_MIN_UPLOAD_RATE %d bytes a second: at least 1", h.MinUploadRate))
	}
	if h.MaxConnsPerAddr < 0 {
		errs = append(errs, fmt.Errorf("AGENTBOX_HTTP_MAX_CONNS_PER_ADDR %d: 0 (no bound) or more", h.MaxConnsPerAddr))
	}
	if h.MaxConns < 16 {
		errs = append(errs, fmt.Errorf("AGENTBOX_HTTP_MAX_CONNS %d: at least 16", h.MaxConns))
	}
	if h.MaxConnsPerAddr > h.MaxConns {
		errs = append(errs, errors.New("AGENTBOX_HTTP_MAX_CONNS_PER_ADDR is over AGENTBOX_HTTP_MAX_CONNS"))
	}
	return errors.Join(errs...)
}

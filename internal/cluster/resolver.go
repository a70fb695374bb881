package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// WorkerLookup reads what the Resolver needs from the store.
type WorkerLookup interface {
	GetJob(ctx context.Context, id string) (store.Job, error)
	Workers(ctx context.Context) ([]store.Worker, error)
}

// DefaultLease is how long a worker may stay silent before the Resolver
// presumes it dead, unless Resolver.Lease says otherwise.
const DefaultLease = 30 * time.Second

// Resolver reaches the guest of a running job's sandbox wherever the job
// runs: on this host through local, on another worker through that
// worker's internal endpoint (Handler). It is an api.Sandboxes.
type Resolver struct {
	local  Guests
	st     WorkerLookup
	self   string
	secret string
	log    *slog.Logger
	// tr carries every tunnel, to every worker: one pool of connections.
	tr *http.Transport
	// Lease is how long a worker may go without a heartbeat and still be
	// reached (DefaultLease; serve sets its lease). Set it before use.
	Lease time.Duration
}

// NewResolver returns a Resolver. local reaches the sandboxes of this
// host (jobs.Service); st is the cluster's store; self is this process's
// worker ID (the lease owner its own jobs carry, "" if it runs none);
// secret is the cluster secret the workers expect.
func NewResolver(local Guests, st WorkerLookup, self, secret string, log *slog.Logger) *Resolver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := &http.Transport{
		Proxy:               nil, // the cluster's own network, never an HTTP proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // pass the browser's Accept-Encoding through untouched
		// What a sandbox's web service answers, relayed by the worker.
		MaxResponseHeaderBytes: guest.MaxResponseHeaderBytes,
	}
	return &Resolver{local: local, st: st, self: self, secret: secret, log: log, tr: tr, Lease: DefaultLease}
}

// Guest returns a client of the guest of job id's sandbox. A job that is
// not running, or runs here, is local's to answer. One running on another
// worker gets a client whose every request goes to that worker's internal
// endpoint; use only its Transport, for the guest's /proxy/ routes.
//
// Errors: store.ErrNotFound for an unknown job, jobs.ErrNoSandbox when the
// job's worker is unknown, presumed dead, has no internal endpoint, or
// this server has no cluster secret. Through the transport, a worker that
// cannot be reached is a plain error (the proxy's 502); one that answers
// that the job has no sandbox there, an error wrapping jobs.ErrNoSandbox.
func (r *Resolver) Guest(ctx context.Context, id string) (*guest.Client, error) {
	j, err := r.st.GetJob(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("resolve guest of job %s: %w", id, err)
	}
	owner := j.LeaseOwner
	if j.Status != store.StatusRunning || owner == "" || owner == r.self {
		return r.local.Guest(ctx, id)
	}
	addr, err := r.workerAddress(ctx, id, owner)
	if err != nil {
		return nil, err
	}
	return guest.NewWithTransport(&tunnel{base: r.tr, worker: owner, addr: addr, jobID: id, secret: r.secret}), nil
}

// workerAddress is the internal endpoint of the worker running job id.
func (r *Resolver) workerAddress(ctx context.Context, id, owner string) (string, error) {
	if r.secret == "" {
		return "", fmt.Errorf("%w: job %s runs on worker %s, and this server has no cluster secret to reach it", jobs.ErrNoSandbox, id, owner)
	}
	ws, err := r.st.Workers(ctx)
	if err != nil {
		return "", fmt.Errorf("resolve guest of job %s: %w", id, err)
	}
	for _, w := range ws {
		switch {
		case w.ID != owner:
			continue
		case time.Since(w.HeartbeatAt) > r.Lease:
			return "", fmt.Errorf("%w: job %s runs on worker %s, silent since %s", jobs.ErrNoSandbox, id, owner, w.HeartbeatAt.UTC().Format(time.RFC3339))
		case w.Address == "":
			return "", fmt.Errorf("%w: job %s runs on worker %s, which has no internal endpoint", jobs.ErrNoSandbox, id, owner)
		}
		return w.Address, nil
	}
	return "", fmt.Errorf("%w: job %s runs on worker %s, which is not registered", jobs.ErrNoSandbox, id, owner)
}

// tunnel sends each request for the guest to the job's worker, as
// /internal/v1/jobs/{id}/guest{path}, with the cluster secret.
type tunnel struct {
	base                        http.RoundTripper
	worker, addr, jobID, secret string
}

func (t *tunnel) RoundTrip(in *http.Request) (*http.Response, error) {
	out := in.Clone(in.Context())
	prefix := routePrefix + t.jobID + "/guest"
	rawPrefix := routePrefix + url.PathEscape(t.jobID) + "/guest"
	out.URL = &url.URL{Scheme: "http", Host: t.addr, Path: prefix + in.URL.Path,
		RawPath: rawPrefix + in.URL.EscapedPath(), RawQuery: in.URL.RawQuery}
	out.Header.Set("Authorization", bearer(t.secret))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("reach worker %s: %w", t.worker, err)
	}
	if resp.Header.Get(errorHeader) != "" {
		return nil, t.workerError(resp)
	}
	return resp, nil
}

// workerError turns an error the worker itself answered into a Go error:
// the job has no sandbox there (it ended, or moved), or the worker refused
// (a secret that differs: the operator's to fix).
func (t *tunnel) workerError(resp *http.Response) error {
	defer resp.Body.Close()
	var body wire.ErrorResponse
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) != nil {
		body.Error.Message = http.StatusText(resp.StatusCode)
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%w: job %s is not known to worker %s", jobs.ErrNoSandbox, t.jobID, t.worker)
	case http.StatusConflict:
		msg := strings.TrimPrefix(body.Error.Message, jobs.ErrNoSandbox.Error()+": ")
		return fmt.Errorf("%w: %s", jobs.ErrNoSandbox, msg)
	case http.StatusUnauthorized:
		return fmt.Errorf("worker %s refused the cluster secret: check AGENTBOX_CLUSTER_SECRET on both", t.worker)
	}
	return fmt.Errorf("worker %s: status %d: %s", t.worker, resp.StatusCode, body.Error.Message)
}

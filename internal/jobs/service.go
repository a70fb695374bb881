// Package jobs owns the life of a job: submission, the scheduler that claims
// jobs with leases and runs them in sandboxes, cancellation, the watchdog,
// recovery after a crash, and the live feed of each job's event log.
package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Errors of the service; the API maps them to statuses.
var (
	// ErrInvalid means the request is malformed; the message says how.
	ErrInvalid = errors.New("invalid request")
	// ErrNotEnded means the job's results are not available yet.
	ErrNotEnded = errors.New("job has not ended")
	// ErrEnded means the job already ended (e.g. on cancel).
	ErrEnded = errors.New("job already ended")
	// ErrOverCeiling means a limit asked for is over the operator's
	// ceiling for it; the message names both.
	ErrOverCeiling = errors.New("limit over its ceiling")
	// ErrNoModel means the server has no model to run the job's agent
	// with; the message says what the operator sets on the server.
	ErrNoModel = errors.New("this server has no model for agent jobs")
)

// Limits on what a submission may ask for; the operator's ceilings
// (config.Ceilings) bound its limits.
const (
	MaxTaskBytes     = 256 << 10
	MaxMetadataKeys  = 64
	MaxMetadataBytes = 16 << 10
	// MaxQueryBytes bounds a job list's search text.
	MaxQueryBytes = 200
)

// SubmitRequest is a new job as a client asks for it.
type SubmitRequest struct {
	Task           string
	Model          string
	Limits         store.Limits
	Metadata       map[string]string
	IdempotencyKey string
	// Image, WorkspaceFrom and Repo say what the job starts from.
	Image         string
	WorkspaceFrom string
	Repo          *store.Repo
	// Isolation is the tier the job runs under; empty for the server's
	// default.
	Isolation string
	// Network is the job's egress policy as asked; zero for the
	// operator's default (AGENTBOX_EGRESS_DEFAULT).
	Network egress.Policy
	// Staged is the workspace made for the job (Stage, StageCopy); Submit
	// makes the job on it, or removes it.
	Staged *Staged
}

// DefaultMaxAttempts is how many attempts a job gets unless
// ServiceConfig.MaxAttempts says otherwise (AGENTBOX_MAX_ATTEMPTS's
// default).
var DefaultMaxAttempts = config.Default().Server.MaxAttempts

// ServiceConfig is everything a Service is made of; NewService fills in
// the defaults of its zero fields.
type ServiceConfig struct {
	// Store holds the jobs, Workspaces their workspaces.
	Store      store.Store
	Workspaces workspace.Store
	// Feed is the process's live feed, shared with its Scheduler (nil:
	// the Scheduler's, else a feed of its own).
	Feed *Feed
	// Scheduler runs this node's jobs; nil on an API-only node.
	Scheduler *Scheduler
	// MaxAttempts is how many attempts a new job gets; 0: DefaultMaxAttempts.
	MaxAttempts int
	// Lease is the workers' lease, by which Workers judges a registered
	// worker alive; 0: the Scheduler's, else DefaultLease.
	Lease time.Duration
	// Ceilings are the most a submission's limits may ask for; zero: the
	// defaults, which follow the host.
	Ceilings config.Ceilings
	// Images are the images a job may ask for, normalized, the sandbox
	// image first (config.Sandbox.AllowedImages); nil: the default
	// sandbox image only.
	Images []string
	// Repos holds the host's git and the jobs' git dirs, for the diffs of
	// ended jobs and the check of submitted repositories; nil on a node
	// without git.
	Repos *Repos
	// Media keeps the images of tool results, served with the job and
	// removed with its data; nil: none are kept.
	Media *Media
	// MaxUpload is how many bytes of files an uploaded or copied workspace
	// may hold (AGENTBOX_MAX_UPLOAD); 0: the default, 1 GiB.
	MaxUpload int64
	// Snapshots is the directory the snapshots of running jobs'
	// workspaces are made in, emptied by NewService (what a past run
	// left); empty: a running job's files are refused.
	Snapshots string
	// Isolation is the tier of a job that names none (empty: container);
	// CheckIsolation, when set, says, with sandbox.ErrIsolationUnavailable,
	// why a tier cannot run here (nil on a node without a driver: the
	// worker that claims the job refuses it then).
	Isolation      string
	CheckIsolation func(ctx context.Context, iso string) error
	// Egress is the operator's egress settings jobs' policies are checked
	// against (config.Egress.Policy); nil: every mode, no presets or
	// secrets, and mode none for a job that states no policy.
	Egress *egress.Config
	// CheckModel, when set, makes Submit refuse, before anything is
	// recorded, a job whose model it cannot open: it returns an error
	// wrapping ErrNoModel that says what the operator must set. A server
	// whose agent needs no model (the shell agent) sets none.
	CheckModel func(spec string) error
	// NoMessages, when set, is why Reply refuses every message (the shell
	// agent runs a script and has no conversation to continue).
	NoMessages string
}

// Service is what the API and the CLI's local mode call.
type Service struct {
	store  store.Store
	feed   *Feed
	sched  *Scheduler // nil on an API-only node
	ws     workspace.Store
	maxAtt int
	lease  time.Duration
	// recovered holds the sandboxes Guest reattached to for jobs of other
	// servers.
	recovered recoveredGuests
	ceilings  config.Ceilings
	// images are the images a job may ask for, normalized.
	images []string
	// noMessages, when set, is why Reply refuses every message.
	noMessages string
	// checkModel, when set, refuses (ErrNoModel) a job whose model the
	// server cannot open.
	checkModel func(spec string) error
	// repos holds the jobs' git dirs; nil on a node without git.
	repos     *Repos
	maxUpload int64  // bytes of files a staged or copied workspace may hold; 0: the default
	media     *Media // the images of tool results; nil: none are kept
	// isolation is the tier of a job that names none; checkIsolation, when
	// set, refuses a tier that cannot run here.
	isolation      string
	checkIsolation func(ctx context.Context, iso string) error
	// egress is what jobs' network policies are checked against.
	egress *egress.Config
	// snaps are the snapshots running jobs' files are read from; nil:
	// they are refused.
	snaps *snapshots
}

// defaults fills in the zero fields of c that have a default.
func (c *ServiceConfig) defaults() {
	def := config.Default().Sandbox
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.Ceilings = cmp.Or(c.Ceilings, def.Ceilings)
	if c.Images == nil {
		c.Images = def.AllowedImages()
	}
	if c.Scheduler != nil {
		// The scheduler's events wake the service's followers, and its
		// proxies hear the policy changes made here.
		c.Feed = cmp.Or(c.Feed, c.Scheduler.feed)
		c.Lease = cmp.Or(c.Lease, c.Scheduler.cfg.Lease)
	}
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	if c.Feed == nil {
		c.Feed = NewFeed(c.Store, nil)
	}
}

// NewService returns the service cfg describes.
func NewService(cfg ServiceConfig) (*Service, error) {
	cfg.defaults()
	s := &Service{store: cfg.Store, feed: cfg.Feed, sched: cfg.Scheduler, ws: cfg.Workspaces,
		maxAtt: cfg.MaxAttempts, lease: cfg.Lease, ceilings: cfg.Ceilings, images: cfg.Images,
		noMessages: cfg.NoMessages, checkModel: cfg.CheckModel, repos: cfg.Repos, maxUpload: cfg.MaxUpload,
		media: cfg.Media, isolation: cfg.Isolation, checkIsolation: cfg.CheckIsolation, egress: cfg.Egress}
	if cfg.Snapshots != "" {
		var err error
		if s.snaps, err = newSnapshots(cfg.Snapshots); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Get returns a job.
func (s *Service) Get(ctx context.Context, id string) (store.Job, error) {
	return s.store.GetJob(ctx, id)
}

// List returns a page of jobs, newest first.
func (s *Service) List(ctx context.Context, opts store.ListOptions) (store.JobPage, error) {
	if opts.Status != "" && !opts.Status.Valid() {
		return store.JobPage{}, fmt.Errorf("%w: unknown status %q", ErrInvalid, opts.Status)
	}
	if len(opts.Query) > MaxQueryBytes || !utf8.ValidString(opts.Query) {
		return store.JobPage{}, fmt.Errorf("%w: q must be UTF-8 text of at most %d bytes", ErrInvalid, MaxQueryBytes)
	}
	if opts.Limit < 0 || opts.Limit > 1000 {
		return store.JobPage{}, fmt.Errorf("%w: limit must be between 1 and 1000", ErrInvalid)
	}
	return s.store.ListJobs(ctx, opts)
}

// Cancel stops a job: a pending one ends canceled at once; a running one is
// flagged, and its worker kills the work and the sandbox. ErrEnded if the job
// already ended.
func (s *Service) Cancel(ctx context.Context, id string) (store.Job, error) {
	var wasPending bool
	j, err := s.store.UpdateJob(ctx, id, func(j *store.Job) error {
		if j.Status.Final() {
			return fmt.Errorf("%w: job %s is %s", ErrEnded, j.ID, j.Status)
		}
		j.CancelRequested = true
		if j.Status == store.StatusPending {
			wasPending = true
			j.Status, j.Error, j.EndedAt = store.StatusCanceled, "canceled by request", time.Now().UTC()
		}
		return nil
	})
	if err != nil {
		return j, err
	}
	if wasPending {
		s.emit(ctx, id, event.State{Status: store.StatusCanceled, Error: j.Error})
	} else if s.sched != nil {
		s.sched.cancelLocal(id)
	}
	return j, nil
}

// Events returns up to limit events of a job after seq after.
func (s *Service) Events(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	if _, err := s.store.GetJob(ctx, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return s.store.Events(ctx, id, after, limit)
}

// LastSeq returns the seq of the job's last event (0 for none), so a
// reader can start at a log's end.
func (s *Service) LastSeq(ctx context.Context, id string) (int64, error) {
	return s.store.LastSeq(ctx, id)
}

// WaitEvents blocks until the job may have events after seq after, the job
// has ended, poll passes (events appended by another server, when the
// store has no notes to wake the scheduler's followers with), or ctx ends.
// The caller reads again with Events.
func (s *Service) WaitEvents(ctx context.Context, id string, after int64, poll time.Duration) error {
	ch, stop := s.feed.subscribe(id)
	defer stop()
	evs, err := s.store.Events(ctx, id, after, 1)
	if err != nil || len(evs) > 0 {
		return err
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// Workspace returns the store holding job id's workspace (under the job's
// ID), once it checked there is one to read: ErrDeleted once its data was
// removed, store.ErrNotFound if it ended before it had one. An ended
// job's is its final state. A running job's is read from its last
// checkpoint when the store is a Shared one (a snapshot the sandbox
// cannot touch), else from a snapshot of its live workspace that this
// call takes or reuses (see ServiceConfig.Snapshots), held until ctx ends; never
// from the live workspace, which the sandbox may change under a reader.
// ErrNotEnded, saying what to do, when there is none to read yet.
func (s *Service) Workspace(ctx context.Context, id string) (workspace.Store, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.readable(j); err != nil {
		return nil, err
	}
	if !j.Status.Final() && s.shared() == nil {
		return s.liveFiles(ctx, j)
	}
	if j.Status.Final() {
		s.dropSnapshot(id)
	}
	ok, err := s.ws.Exists(ctx, id)
	switch {
	case err == nil && !ok && !j.Status.Final():
		return nil, fmt.Errorf("%w: job %s is %s and has no checkpoint yet: wait for its first step to end", ErrNotEnded, id, j.Status)
	case err != nil || !ok:
		return nil, fmt.Errorf("job %s has no workspace: %w", id, store.ErrNotFound)
	}
	return s.ws, nil
}

// readable says why job j's workspace cannot be read, if it cannot: it
// was removed.
func (s *Service) readable(j store.Job) error {
	if !j.DeletedAt.IsZero() {
		return fmt.Errorf("%w: the workspace of job %s was deleted at %s (DELETE, or the retention period) and its files removed with it: "+
			"nothing to download; its record and events remain", ErrDeleted, j.ID, j.DeletedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// emit appends an event and wakes its followers. Event writes are part of the
// audit trail; a failure is returned to callers that can act on it.
func (s *Service) emit(ctx context.Context, id string, p event.Payload) error {
	return s.feed.emit(ctx, id, p)
}

// NewID returns a new job ID: "job_" and 20 hex digits, sortable by time.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("job_%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:])[:9])
}

// Package jobs owns the life of a job: submission, the scheduler that claims
// jobs with leases and runs them in sandboxes, cancellation, the watchdog,
// recovery after a crash, and the live feed of each job's event log.
package jobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/sandbox"
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

// Service is what the API and the CLI's local mode call.
type Service struct {
	store  store.Store
	hub    *hub
	sched  *Scheduler // nil on an API-only node
	ws     workspace.Store
	maxAtt int
	// recovered holds the sandboxes Guest reattached to for jobs of other
	// servers.
	recovered recoveredGuests
	ceilings  config.Ceilings
	// images are the images a job may ask for, normalized.
	images []string
	// noMessages, when set, is why Reply refuses every message.
	noMessages string
	// checkModel, when set, refuses (ErrNoModel) a job whose model the
	// server cannot open (SetModelCheck).
	checkModel func(spec string) error
	// repos holds the jobs' git dirs; nil on a node without git.
	repos     *Repos
	maxUpload int64  // bytes of files a staged or copied workspace may hold; 0: the default
	media     *Media // the images of tool results; nil: none are kept
	// isolation is the tier of a job that names none; checkIsolation, when
	// set, refuses a tier that cannot run here.
	isolation      string
	checkIsolation func(ctx context.Context, iso string) error
	// egress is what jobs' network policies are checked against
	// (SetEgress); netWatch the local watchers of their changes (the
	// scheduler's running proxies among them).
	egress   *egress.Config
	netWatch *netWatchers
	// snaps are the snapshots running jobs' files are read from; nil:
	// they are refused (SetSnapshots).
	snaps *snapshots
}

// SetIsolation sets the tier of a job that names none (def, "" for
// container) and check, which says, with sandbox.ErrIsolationUnavailable,
// why a tier cannot run here (nil on a node without a driver: the worker
// that claims the job refuses it then).
func (s *Service) SetIsolation(def string, check func(ctx context.Context, iso string) error) {
	s.isolation, s.checkIsolation = def, check
}

// resolveIsolation is the tier req runs under, refused when it is no tier
// or cannot run here; never another in its place.
func (s *Service) resolveIsolation(ctx context.Context, req SubmitRequest) (string, error) {
	iso := cmp.Or(req.Isolation, s.isolation, sandbox.IsolationContainer)
	if err := sandbox.CheckIsolation(iso); err != nil {
		return "", err
	}
	if s.checkIsolation != nil {
		if err := s.checkIsolation(ctx, iso); err != nil {
			return "", err
		}
	}
	return iso, nil
}

// NewService returns the service over st, whose jobs' workspaces ws keeps.
// sched may be nil.
func NewService(st store.Store, ws workspace.Store, maxAttempts int, sched *Scheduler) *Service {
	h, w := newHub(), &netWatchers{}
	if sched != nil {
		h = sched.hub      // the scheduler's events wake the service's followers
		w = sched.netWatch // and its proxies hear the policy changes made here
	}
	if maxAttempts <= 0 {
		maxAttempts = config.Default().Server.MaxAttempts // AGENTBOX_MAX_ATTEMPTS
	}
	return &Service{store: st, hub: h, netWatch: w, sched: sched, ws: ws, maxAtt: maxAttempts,
		ceilings: config.Default().Sandbox.Ceilings, images: config.Default().Sandbox.AllowedImages()}
}

// SetModelCheck makes Submit refuse, before anything is recorded, a
// job whose model check cannot open: check returns an error wrapping
// ErrNoModel that says what the operator must set. A server whose agent
// needs no model (the shell agent) sets none.
func (s *Service) SetModelCheck(check func(spec string) error) { s.checkModel = check }

// SetCeilings sets the most a submission's limits may ask for (the
// defaults follow the host).
func (s *Service) SetCeilings(c config.Ceilings) { s.ceilings = c }

// Submit validates and durably records a job. created is false when an
// Idempotency-Key replayed an earlier submission. The job's workspace, if
// it starts from one (req.Staged, workspace_from), is whole before the job
// exists; when no job is made on it (an error, a replay), it is removed.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (store.Job, bool, error) {
	j, created, err := s.submit(ctx, &req)
	switch {
	case err != nil:
		err = errors.Join(err, s.Discard(ctx, req.Staged))
	case !created:
		// The replay's answer stands; a workspace left by a failed
		// removal belongs to no job and is never run.
		_ = s.Discard(ctx, req.Staged)
	}
	return j, created, err
}

func (s *Service) submit(ctx context.Context, req *SubmitRequest) (store.Job, bool, error) {
	if err := validate(*req); err != nil {
		return store.Job{}, false, err
	}
	if s.checkModel != nil {
		if err := s.checkModel(req.Model); err != nil {
			return store.Job{}, false, err
		}
	}
	if err := CheckCeilings(req.Limits, s.ceilings); err != nil {
		return store.Job{}, false, err
	}
	// One starting point first: a repository next to an upload is wrong
	// whatever its URL says.
	if err := checkStart(*req, req.Staged != nil); err != nil {
		return store.Job{}, false, err
	}
	checked, err := s.checkSources(*req)
	if err != nil {
		return store.Job{}, false, err
	}
	*req = checked
	iso, err := s.resolveIsolation(ctx, *req)
	if err != nil {
		return store.Job{}, false, err
	}
	network, err := s.submitNetwork(*req)
	if err != nil {
		return store.Job{}, false, err
	}
	id, err := s.startWorkspace(ctx, req)
	if err != nil {
		return store.Job{}, false, err
	}
	now := time.Now().UTC()
	j := store.Job{
		ID: id, Task: req.Task, Model: req.Model, Limits: req.Limits, Metadata: req.Metadata,
		Image: req.Image, WorkspaceFrom: req.WorkspaceFrom, Repo: req.Repo, Turn: 1, Isolation: iso, Network: network,
		Status: store.StatusPending, MaxAttempts: s.maxAtt, IdempotencyKey: req.IdempotencyKey,
		RequestHash: requestHash(*req), CreatedAt: now, UpdatedAt: now,
	}
	j, created, err := s.store.CreateJob(ctx, j)
	if err != nil {
		return j, false, fmt.Errorf("submit: %w", err)
	}
	if created {
		s.emit(ctx, j.ID, event.State{Status: store.StatusPending})
		if s.sched != nil {
			s.sched.wake()
		}
	}
	return j, created, nil
}

// checkSources checks what the job starts from and runs in, and returns
// the request as it is recorded: the image normalized, a pull request
// implying a push.
func (s *Service) checkSources(req SubmitRequest) (SubmitRequest, error) {
	image, err := CheckImage(req.Image, s.images)
	if err != nil {
		return req, err
	}
	req.Image = image
	if err := s.checkRepo(req.Repo); err != nil {
		return req, err
	}
	req.Repo, err = checkHandBack(req.Repo)
	return req, err
}

func validate(req SubmitRequest) error {
	var p Problems
	if strings.TrimSpace(req.Task) == "" {
		p.Add("task", "task is empty")
	}
	if len(req.Task) > MaxTaskBytes || !utf8.ValidString(req.Task) {
		p.Add("task", fmt.Sprintf("task must be UTF-8 text of at most %d bytes", MaxTaskBytes))
	}
	l := req.Limits
	if l.Timeout < 0 {
		p.Add("limits.timeout", "limits.timeout must not be negative")
	}
	if l.MaxSteps < 0 {
		p.Add("limits.max_steps", "limits.max_steps must not be negative")
	}
	if l.MemoryBytes != 0 && l.MemoryBytes < 64<<20 || l.MemoryBytes < 0 {
		p.Add("limits.memory", "limits.memory must be at least 64MiB")
	}
	if l.DiskBytes != 0 && l.DiskBytes < 64<<20 || l.DiskBytes < 0 {
		p.Add("limits.disk", "limits.disk must be at least 64MiB")
	}
	if l.ContextWindow < 0 || l.ContextWindow > 10_000_000 || l.ContextWindow > 0 && l.ContextWindow < 2048 {
		p.Add("limits.context_window", "limits.context_window must be 0 (the model's) or between 2048 and 10,000,000 tokens")
	}
	if l.NanoCPUs < 0 {
		p.Add("limits.cpus", "limits.cpus must not be negative")
	}
	if l.EgressBytes != 0 && l.EgressBytes < 1<<20 || l.EgressBytes < 0 {
		p.Add("limits.egress", "limits.egress must be at least 1MiB")
	}
	size := 0
	for k, v := range req.Metadata {
		size += len(k) + len(v)
	}
	if len(req.Metadata) > MaxMetadataKeys || size > MaxMetadataBytes {
		p.Add("metadata", fmt.Sprintf("metadata: at most %d keys and %d bytes", MaxMetadataKeys, MaxMetadataBytes))
	}
	if req.Model != "" {
		if _, _, err := llm.ParseSpec(req.Model); err != nil {
			p.Add("model", fmt.Sprintf("model %q: want anthropic:NAME or openai:NAME", req.Model))
		}
	}
	if len(req.IdempotencyKey) > 255 {
		p.Add("Idempotency-Key", "Idempotency-Key: at most 255 bytes")
	}
	return p.Err(ErrInvalid)
}

// requestHash fingerprints the parts of a submission an Idempotency-Key covers.
func requestHash(req SubmitRequest) string {
	var network *egress.Policy
	if !req.Network.IsZero() {
		network = &req.Network
	}
	upload := ""
	if req.Staged != nil {
		upload = req.Staged.digest
	}
	b, _ := json.Marshal(struct {
		Task, Model          string
		Limits               store.Limits
		Metadata             map[string]string
		Image, WorkspaceFrom string      `json:",omitempty"`
		Repo                 *store.Repo `json:",omitempty"`
		Upload               string      `json:",omitempty"`
		Isolation            string      `json:",omitempty"`
		// Network is omitted when zero, so the hashes of earlier
		// submissions stay as they were.
		Network *egress.Policy `json:",omitempty"`
	}{req.Task, req.Model, req.Limits, req.Metadata, req.Image, req.WorkspaceFrom, req.Repo, upload, req.Isolation, network})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
	ch, stop := s.hub.subscribe(id)
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
// call takes or reuses (see SetSnapshots), held until ctx ends; never
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
	return emit(ctx, s.store, s.hub, id, p)
}

func emit(ctx context.Context, st store.Store, h *hub, id string, p event.Payload) error {
	_, err := appendEvent(ctx, st, h, id, p)
	return err
}

// appendEvent is emit, returning the event as stored.
func appendEvent(ctx context.Context, st store.Store, h *hub, id string, p event.Payload) (store.Event, error) {
	typ, b, err := event.Marshal(p)
	if err != nil {
		return store.Event{}, err
	}
	ev, err := st.AppendEvent(context.WithoutCancel(ctx), id, typ, b)
	if err != nil {
		return ev, fmt.Errorf("event %s: %w", typ, err)
	}
	h.notify(id)
	return ev, nil
}

// NewID returns a new job ID: "job_" and 20 hex digits, sortable by time.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("job_%011x%s", time.Now().UnixMilli(), hex.EncodeToString(b[:])[:9])
}

package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// Intake is a submission on its way in: the request, completed by the
// steps of intakeSteps as they run, in order, once each, and what they
// decide for the job to be recorded. Submit runs all of them; Check, the
// ones that need no upload, before one is read.
type Intake struct {
	svc *Service
	Req SubmitRequest
	// upload says a workspace comes with the request (Check: to come).
	upload bool
	// isolation, network and id are decided by their steps.
	isolation string
	network   json.RawMessage
	id        string
}

// intakeStep is one step of the intake: it checks or completes in.
type intakeStep struct {
	name string
	// early steps are those Check runs, before an upload is read.
	early bool
	run   func(in *Intake, ctx context.Context) error
}

// intakeSteps are the intake, in order. The model is checked before the
// ceilings (an agent job on a server without one is refused first), and
// one starting point before what it names (a repository next to an
// upload is wrong whatever its URL says); staging comes last: it makes
// the workspace, which the job is then recorded on or which is removed.
var intakeSteps = []intakeStep{
	{"validate", true, (*Intake).validate},
	{"model", false, (*Intake).checkModel},
	{"ceilings", true, (*Intake).checkCeilings},
	{"start", true, (*Intake).checkStart},
	{"image", false, (*Intake).checkImage},
	{"repo", false, (*Intake).checkRepo},
	{"hand-back", false, (*Intake).checkHandBack},
	{"isolation", false, (*Intake).resolveIsolation},
	{"network", false, (*Intake).checkNetwork},
	{"staging", false, (*Intake).stage},
}

// run runs the steps of the intake, the early ones only if early is set,
// and stops at the first that fails.
func (in *Intake) run(ctx context.Context, early bool) error {
	for _, st := range intakeSteps {
		if early && !st.early {
			continue
		}
		if err := st.run(in, ctx); err != nil {
			return err
		}
	}
	return nil
}

// Check runs the checks Submit makes of req before it records anything,
// so that a request can be refused before its workspace is uploaded.
// upload says a workspace is to come with it.
func (s *Service) Check(req SubmitRequest, upload bool) error {
	in := &Intake{svc: s, Req: req, upload: upload}
	return in.run(context.Background(), true)
}

// Submit validates and durably records a job. created is false when an
// Idempotency-Key replayed an earlier submission. The job's workspace, if
// it starts from one (req.Staged, workspace_from), is whole before the job
// exists; when no job is made on it (an error, a replay), it is removed.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (store.Job, bool, error) {
	in := &Intake{svc: s, Req: req, upload: req.Staged != nil}
	j, created, err := in.submit(ctx)
	switch {
	case err != nil:
		err = errors.Join(err, s.Discard(ctx, in.Req.Staged))
	case !created:
		// The replay's answer stands; a workspace left by a failed
		// removal belongs to no job and is never run.
		_ = s.Discard(ctx, in.Req.Staged)
	}
	return j, created, err
}

// submit runs the intake and records the job it made.
func (in *Intake) submit(ctx context.Context) (store.Job, bool, error) {
	if err := in.run(ctx, false); err != nil {
		return store.Job{}, false, err
	}
	s, req := in.svc, in.Req
	now := time.Now().UTC()
	j := store.Job{
		ID: in.id, Task: req.Task, Model: req.Model, Limits: req.Limits, Metadata: req.Metadata,
		Image: req.Image, WorkspaceFrom: req.WorkspaceFrom, Repo: req.Repo, Turn: 1, Isolation: in.isolation, Network: in.network,
		Status: store.StatusPending, MaxAttempts: s.maxAtt, IdempotencyKey: req.IdempotencyKey,
		RequestHash: requestHash(req), CreatedAt: now, UpdatedAt: now,
	}
	j, created, err := s.store.CreateJob(ctx, j)
	if err != nil {
		return j, false, fmt.Errorf("submit: %w", err)
	}
	if created {
		_ = s.feed.emit(ctx, j.ID, event.State{Status: store.StatusPending})
		s.feed.wake()
	}
	return j, created, nil
}

// validate refuses a malformed request.
func (in *Intake) validate(context.Context) error { return validate(in.Req) }

// checkCeilings refuses limits over the operator's ceilings.
func (in *Intake) checkCeilings(context.Context) error {
	return CheckCeilings(in.Req.Limits, in.svc.ceilings)
}

// checkStart refuses more than one starting point.
func (in *Intake) checkStart(context.Context) error { return checkStart(in.Req, in.upload) }

// checkRepo refuses a repository the host's git may not reach.
func (in *Intake) checkRepo(context.Context) error { return in.svc.checkRepo(in.Req.Repo) }

// checkModel refuses a job whose model the server cannot open
// (ServiceConfig.CheckModel).
func (in *Intake) checkModel(context.Context) error {
	if in.svc.checkModel == nil {
		return nil
	}
	return in.svc.checkModel(in.Req.Model)
}

// checkImage refuses an image not allowed, and normalizes the one asked for.
func (in *Intake) checkImage(context.Context) error {
	image, err := CheckImage(in.Req.Image, in.svc.images)
	in.Req.Image = image
	return err
}

// checkHandBack refuses a hand-back that cannot be made; a pull request
// implies a push.
func (in *Intake) checkHandBack(context.Context) error {
	var err error
	in.Req.Repo, err = checkHandBack(in.Req.Repo)
	return err
}

// resolveIsolation decides the tier the job runs under, refused when it
// is no tier or cannot run here; never another in its place.
func (in *Intake) resolveIsolation(ctx context.Context) error {
	s := in.svc
	iso := cmp.Or(in.Req.Isolation, s.isolation, sandbox.IsolationContainer)
	if err := sandbox.CheckIsolation(iso); err != nil {
		return err
	}
	if s.checkIsolation != nil {
		if err := s.checkIsolation(ctx, iso); err != nil {
			return err
		}
	}
	in.isolation = iso
	return nil
}

// checkNetwork decides the job's egress policy as it records it.
func (in *Intake) checkNetwork(context.Context) error {
	var err error
	in.network, err = in.svc.submitNetwork(in.Req)
	return err
}

// stage gives the job the workspace it starts from, and its ID.
func (in *Intake) stage(ctx context.Context) error {
	var err error
	in.id, err = in.svc.startWorkspace(ctx, &in.Req)
	return err
}

func validate(req SubmitRequest) error {
	var p Problems
	if strings.TrimSpace(req.Task) == "" {
		p.Add("task", "task is empty")
	}
	if len(req.Task) > MaxTaskBytes || !utf8.ValidString(req.Task) {
		p.Add("task", fmt.Sprintf("task must be UTF-8 text of at most %d bytes", MaxTaskBytes))
	}
	validateLimits(&p, req.Limits)
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

// validateLimits adds to p what is wrong with limits l whatever the
// ceilings.
func validateLimits(p *Problems, l store.Limits) {
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
}

// checkStart refuses a job that names more than one starting point.
func checkStart(req SubmitRequest, upload bool) error {
	var starts []string
	if upload {
		starts = append(starts, "an uploaded workspace")
	}
	if req.WorkspaceFrom != "" {
		starts = append(starts, "workspace_from")
	}
	if req.Repo != nil {
		starts = append(starts, "repo")
	}
	if len(starts) > 1 {
		return fmt.Errorf("%w: a job starts from one of an uploaded workspace, workspace_from or repo, not from %s",
			ErrBadStart, strings.Join(starts, " and "))
	}
	return nil
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

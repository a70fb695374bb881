package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// A job starts in an empty workspace, or in one made for it before its
// record exists (so no worker can start it on half a tree): unpacked from
// an upload (Stage), copied from a person's directory (StageCopy), or
// copied from another job's final workspace (workspace_from, at Submit).

// ErrBadStart means what a job is to start from cannot be used:
// workspace_from names no ended job with a workspace, or the submission
// names more than one starting point. The message says which job and why.
var ErrBadStart = errors.New("bad starting point")

// Upload is a workspace archive sent with a submission.
type Upload struct {
	R      io.Reader
	Format workspace.Format
}

// Staged is a workspace made for a job not submitted yet. Submit, given
// it in SubmitRequest.Staged, makes the job on it, or removes it; Discard
// removes it when the job will not be submitted.
type Staged struct {
	id string
	// digest is the upload's sha256, part of the request an
	// Idempotency-Key covers.
	digest string
}

func (s *Service) startLimits() workspace.Limits {
	return workspace.Limits{MaxBytes: s.maxUpload}
}

// Stage unpacks an uploaded workspace for a job about to be submitted, or
// fails leaving nothing behind: workspace.ErrBadArchive (why in the
// message), workspace.ErrTooLarge. It reads u.R to its end.
func (s *Service) Stage(ctx context.Context, u Upload) (*Staged, error) {
	st := &Staged{id: NewID()}
	h := sha256.New()
	if err := s.ws.Unpack(ctx, st.id, io.TeeReader(u.R, h), u.Format, s.startLimits()); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if _, err := io.Copy(h, u.R); err != nil { // what follows the archive's end
		return nil, errors.Join(fmt.Errorf("workspace: %w", err), s.Discard(ctx, st))
	}
	st.digest = hex.EncodeToString(h.Sum(nil))
	return st, nil
}

// StageCopy copies the tree under src into a workspace for a job about to
// be submitted (see workspace.Copy), and says what it left out.
func (s *Service) StageCopy(ctx context.Context, src *os.Root) (*Staged, []string, error) {
	st := &Staged{id: NewID()}
	skipped, err := s.ws.Copy(ctx, st.id, src, s.startLimits())
	if err != nil {
		return nil, nil, fmt.Errorf("workspace: %w", err)
	}
	return st, skipped, nil
}

// Discard removes a staged workspace whose job will not be submitted.
func (s *Service) Discard(ctx context.Context, st *Staged) error {
	if st == nil {
		return nil
	}
	return s.ws.Remove(context.WithoutCancel(ctx), st.id)
}

// startWorkspace gives req the workspace it starts from, if it starts from
// one, and returns the new job's ID: the staged workspace's, or a new one,
// made a copy of workspace_from's (req.Staged then holds it).
func (s *Service) startWorkspace(ctx context.Context, req *SubmitRequest) (string, error) {
	if req.Staged != nil {
		return req.Staged.id, nil
	}
	id := NewID()
	if req.WorkspaceFrom == "" {
		return id, nil
	}
	if err := s.copyFrom(ctx, req.WorkspaceFrom, id); err != nil {
		return "", err
	}
	req.Staged = &Staged{id: id}
	return id, nil
}

// copyFrom makes workspace id a copy of the final workspace of job from.
func (s *Service) copyFrom(ctx context.Context, from, id string) error {
	j, err := s.store.GetJob(ctx, from)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: workspace_from: there is no job %q", ErrBadStart, from)
	case err != nil:
		return fmt.Errorf("workspace_from: %w", err)
	case !j.Status.Final():
		return fmt.Errorf("%w: workspace_from: job %s has not ended yet (it is %s); start from it once it has", ErrBadStart, from, j.Status)
	case !j.DeletedAt.IsZero():
		return fmt.Errorf("%w: workspace_from: the workspace of job %s was deleted at %s", ErrBadStart, from, j.DeletedAt.UTC().Format(time.RFC3339))
	}
	src, err := s.ws.Open(ctx, from)
	if errors.Is(err, workspace.ErrNotFound) {
		return fmt.Errorf("%w: workspace_from: job %s has no workspace (it ended before it had one)", ErrBadStart, from)
	}
	if err != nil {
		return fmt.Errorf("workspace_from: %w", err)
	}
	defer src.Close()
	if _, err := s.ws.Copy(ctx, id, src, s.startLimits()); err != nil {
		return fmt.Errorf("workspace_from %s: %w", from, err)
	}
	return nil
}

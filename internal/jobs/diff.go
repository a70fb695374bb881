package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/store"
)

// DiffName is the diff's name in a job's artifacts.zip.
const DiffName = "agentbox.diff"

var (
	// ErrNoDiff means an ended job has no diff to give: it has no
	// workspace, or its repository was never cloned.
	ErrNoDiff = errors.New("no diff")
	// ErrNotRepo means what was asked is for repository jobs only.
	ErrNotRepo = errors.New("not a repository job")
)

// Diff writes to w what ended job id changed in its workspace since it
// started: a unified diff against its base commit (the cloned one, or the
// snapshot of its starting workspace), or with patch the git
// format-patch mail of it (repository jobs only: ErrNotRepo otherwise).
// An unchanged workspace writes nothing. The diff is made into a file of
// the data dir first (see spool), and an ended job's is kept: the next
// call copies it (a patch too). ErrDiffUnavailable when git stopped at a
// bound, the diff is over Repos.MaxDiff, or the data dir is under the
// free-space floor; the first two are remembered for an ended job until
// it runs again. ErrNotEnded while the job runs
// on a service without a Shared store: its sandbox could swap a file for
// a link to a host file between git's look at a path and its read of it,
// so the live workspace is read only once the sandbox is gone; a Shared
// store gives the diff of a running job's last checkpoint, a snapshot
// the sandbox cannot touch. ErrDeleted once its data was removed, ErrNoDiff
// when there is nothing to take a diff of.
func (s *Service) Diff(ctx context.Context, id string, patch bool, w io.Writer) error {
	kind := kindDiff
	if patch {
		kind = kindPatch
	}
	return s.diffTo(ctx, id, kind, w)
}

// DiffAll is Diff with what it leaves out kept: the files the
// workspace's .gitignore files ignore, and the caches (__pycache__,
// node_modules, ...; see githost.DiffWith).
func (s *Service) DiffAll(ctx context.Context, id string, w io.Writer) error {
	return s.diffTo(ctx, id, kindAll, w)
}

// diffKind is what is asked of a job's diff.
type diffKind int

const (
	kindDiff  diffKind = iota // the diff, without ignored files and caches
	kindPatch                 // the patch (repository jobs)
	kindAll                   // the diff with ignored files and caches
)

// ext is the extension of a kept file of the kind.
func (k diffKind) ext() string { return [...]string{".diff", ".patch", ".all.diff"}[k] }

func (s *Service) diffTo(ctx context.Context, id string, kind diffKind, w io.Writer) error {
	f, err := s.diffFile(ctx, id, kind)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

// diffFile returns job id's diff (or patch) as a file open at its start:
// an ended job's kept one, else one made for this call.
func (s *Service) diffFile(ctx context.Context, id string, kind diffKind) (*os.File, error) {
	j, err := s.diffable(ctx, id, kind == kindPatch)
	if err != nil {
		return nil, err
	}
	if !j.Status.Final() {
		return s.spool(ctx, j, kind, "")
	}
	return s.kept(ctx, j, kind)
}

// makeDiff writes job j's diff (or patch) to w with the host's git.
func (s *Service) makeDiff(ctx context.Context, j store.Job, kind diffKind, w io.Writer) error {
	gitDir, dir, done, err := s.diffDirs(ctx, j)
	if err != nil {
		return err
	}
	defer done()
	h := s.repos.Host
	if kind == kindPatch {
		err = h.FormatPatch(ctx, gitDir, dir, j.Git.BaseCommit, patchMessage(j), w)
	} else {
		err = h.DiffWith(ctx, gitDir, dir, j.Git.BaseCommit, githost.DiffOptions{All: kind == kindAll}, w)
	}
	if errors.Is(err, githost.ErrBound) {
		return fmt.Errorf("%w: %w", ErrDiffUnavailable, err)
	}
	return err
}

// diffable checks that job id has a diff to give, and returns the job.
func (s *Service) diffable(ctx context.Context, id string, patch bool) (store.Job, error) {
	j, err := s.store.GetJob(ctx, id)
	switch {
	case err != nil:
		return j, err
	case s.repos == nil:
		return j, errors.New("diff: git is not configured")
	case !j.Status.Final() && s.shared() == nil:
		return j, fmt.Errorf("%w: job %s is %s; its diff is made once it has ended and its sandbox is gone, "+
			"as a running sandbox could swap the files git reads for links", ErrNotEnded, id, j.Status)
	case !j.DeletedAt.IsZero():
		return j, fmt.Errorf("%w: the workspace of job %s was removed at %s; its diff with it",
			ErrDeleted, id, j.DeletedAt.UTC().Format(time.RFC3339))
	case patch && j.Repo == nil:
		return j, fmt.Errorf("%w: format=patch is for jobs that started from a repository; job %s did not", ErrNotRepo, id)
	case j.Repo != nil && j.Git.BaseCommit == "":
		return j, fmt.Errorf("%w: job %s has no diff: its repository was never cloned", ErrNoDiff, id)
	}
	ok, err := s.ws.Exists(ctx, id)
	switch {
	case err == nil && !ok && !j.Status.Final():
		return j, fmt.Errorf("%w: job %s is %s and has no checkpoint yet", ErrNotEnded, id, j.Status)
	case err != nil || !ok:
		return j, fmt.Errorf("%w: job %s has no workspace: it ended before its sandbox started", ErrNoDiff, id)
	}
	return j, nil
}

// patchMessage is the commit message of a job's patch: the task's first
// line as the subject, the job and its result below.
func patchMessage(j store.Job) string {
	subject, _, _ := strings.Cut(strings.TrimSpace(j.Task), "\n")
	if len(subject) > 72 {
		subject = strings.TrimSpace(subject[:69]) + "..."
	}
	msg := subject + "\n\nagentbox job " + j.ID + "."
	if j.Result != "" {
		msg += "\n\n" + j.Result
	}
	return msg + "\n"
}

// Artifacts writes ended job id's workspace to w as a zip bounded by
// opts, with its diff (Diff) at its root as DiffName (the manifest says
// why when there is none) and, when the job's sandbox reached out, its
// network events as NetworkLogName.
func (s *Service) Artifacts(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error) {
	ws, err := s.Workspace(ctx, id)
	if err != nil {
		return artifact.Report{}, err
	}
	if s.repos != nil {
		opts.Extra = append(opts.Extra, artifact.Extra{Name: DiffName, Open: func() (io.ReadCloser, error) { return s.diffFile(ctx, id, kindDiff) }})
	}
	opts.Extra = append(opts.Extra, s.networkExtra(ctx, id))
	return ws.Zip(ctx, id, w, opts)
}

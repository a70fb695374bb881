package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/store"
)

// ErrBadRepo means a submission's repository is malformed or not allowed
// here (its url, ref or branch); the message says how.
var ErrBadRepo = errors.New("bad repository")

// Repos is where the host keeps its jobs' git dirs, <Dir>/<job id>.git
// (never in a workspace, which the sandbox writes), and the host's git
// that works on them.
type Repos struct {
	Host *githost.Host
	Dir  string
	// Forge opens the pull requests of pushed branches; nil: none is.
	Forge PullRequests
	// Timeout bounds each step of a job's hand-back (its commit, its
	// push, its pull request); AGENTBOX_GIT_TIMEOUT's default if zero.
	Timeout time.Duration
	// Diffs is how many diffs are made at once (AGENTBOX_GIT_DIFFS);
	// AGENTBOX_GIT_DIFFS's default if zero.
	Diffs int
	// MaxDiff is the most bytes a diff (or patch) may take
	// (AGENTBOX_GIT_MAX_DIFF); its default if zero.
	MaxDiff int64
	// MinFree is the free space of Dir's filesystem under which no diff
	// is spooled there (AGENTBOX_MIN_FREE_DISK), as DiskFree measures it;
	// 0 or no DiskFree: no floor.
	MinFree  int64
	DiskFree func(dir string) (int64, error)

	diffs diffs
}

// GitDir is the host's git dir of job id.
func (r *Repos) GitDir(id string) string { return filepath.Join(r.Dir, id+".git") }

// remove removes job id's git dir and diffs. The host alone writes
// them, so there is no link of the sandbox's to follow in them.
func (r *Repos) remove(id string) error {
	if err := os.RemoveAll(r.GitDir(id)); err != nil {
		return fmt.Errorf("remove git dir: %w", err)
	}
	if err := os.RemoveAll(r.diffDir(id)); err != nil {
		return fmt.Errorf("remove diffs: %w", err)
	}
	return nil
}

// list returns the IDs of the jobs that have a git dir.
func (r *Repos) list() ([]string, error) {
	ents, err := os.ReadDir(r.Dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("list git dirs: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".git"); ok && e.IsDir() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// DefaultBranch is the branch a repository job's result goes on when it
// names none.
func DefaultBranch(jobID string) string { return "agentbox/" + jobID }

// checkRepo refuses a repository a job could not start from: no url, a
// url that is malformed or not allowed on this server (local paths), a
// ref or branch git would refuse.
func (s *Service) checkRepo(r *store.Repo) error {
	if r == nil {
		return nil
	}
	var err error
	field := "repo.url"
	switch {
	case strings.TrimSpace(r.URL) == "":
		return fieldError(ErrBadRepo, field, "repo.url is required")
	case s.repos != nil:
		err = s.repos.Host.CheckURL(r.URL)
	default:
		err = githost.ParseURL(r.URL)
	}
	if err == nil && r.Ref != "" {
		field, err = "repo.ref", githost.CheckRef(r.Ref)
	}
	if err == nil && r.Branch != "" {
		field, err = "repo.branch", githost.CheckBranch(r.Branch)
	}
	if err != nil {
		return fieldError(ErrBadRepo, field, strings.TrimPrefix(err.Error(), githost.ErrRefused.Error()+": "))
	}
	return nil
}

// startFrom records where job j starts, at its first run, before any
// sandbox ran on its workspace: a clone of its repository, or a snapshot
// of what its workspace holds (empty, an upload, another job's). A later
// run (a retry, a restart) finds the base recorded, or a sandbox that ran,
// and leaves the workspace as it is: never a clone over a started one.
func (s *Scheduler) startFrom(ctx context.Context, j store.Job, ws string) (store.Job, error) {
	switch {
	case j.Git.BaseCommit != "" || len(j.Sandbox) > 0:
		return j, nil
	case s.cfg.Repos == nil && j.Repo != nil:
		return j, errors.New("clone: this worker has no git (install git on the host)")
	case s.cfg.Repos == nil:
		return j, nil
	case j.Repo != nil:
		return s.clone(ctx, j)
	}
	base, err := s.cfg.Repos.Host.Snapshot(ctx, s.cfg.Repos.GitDir(j.ID), ws)
	if err != nil {
		s.emit(ctx, j.ID, event.Git{Action: "snapshot", Error: err.Error()})
		return j, fmt.Errorf("record the starting workspace: %w", err)
	}
	j, err = s.recordBase(ctx, j, base, "")
	if err == nil {
		s.emit(ctx, j.ID, event.Git{Action: "snapshot", Commit: base})
	}
	return j, err
}

// clone clones the job's repository into its workspace, emptied first:
// an earlier attempt that died cloning may have left half a checkout.
func (s *Scheduler) clone(ctx context.Context, j store.Job) (store.Job, error) {
	r := *j.Repo
	branch := cmp.Or(r.Branch, DefaultBranch(j.ID))
	ev := event.Git{Action: "clone", URL: githost.Redact(r.URL), Ref: r.Ref, Branch: branch}
	ws, err := s.emptyWorkspace(ctx, j.ID)
	if err != nil {
		return j, err
	}
	base, err := s.cfg.Repos.Host.Clone(ctx, githost.CloneRequest{URL: r.URL, Ref: r.Ref, Branch: branch,
		GitDir: s.cfg.Repos.GitDir(j.ID), WorkDir: ws})
	if err != nil {
		ev.Error = err.Error()
		s.emit(ctx, j.ID, ev)
		return j, err
	}
	if j, err = s.recordBase(ctx, j, base, branch); err != nil {
		return j, err
	}
	ev.Commit = base
	s.emit(ctx, j.ID, ev)
	return j, nil
}

func (s *Scheduler) emptyWorkspace(ctx context.Context, id string) (string, error) {
	if err := s.cfg.Workspaces.Remove(ctx, id); err != nil {
		return "", err
	}
	return s.cfg.Workspaces.Prepare(ctx, id)
}

// recordBase stores the job's base commit (and branch), under this
// worker's lease.
func (s *Scheduler) recordBase(ctx context.Context, j store.Job, base, branch string) (store.Job, error) {
	j2, err := s.store.UpdateJob(ctx, j.ID, func(x *store.Job) error {
		if x.LeaseOwner != s.cfg.WorkerID || x.Status != store.StatusRunning || x.Attempts != j.Attempts {
			return store.ErrLeaseLost
		}
		x.Git.BaseCommit = base
		if branch != "" {
			x.Git.Branch = branch
		}
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("record the base commit: %w", err)
	}
	return j2, nil
}

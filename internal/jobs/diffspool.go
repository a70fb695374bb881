package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store"
)

// A job's diff is made by the host's git from what its sandbox wrote,
// so it costs what the sandbox chose: git's time and memory (bounded by
// githost), and the diff's bytes. Diffs are made DefaultDiffs at a time,
// into a file in the data dir (never /tmp, which the free-space floor
// does not watch), and the diff of an ended job is made once and kept
// next to its git dir until the job runs again.

// DefaultDiffs is how many diffs a service makes at once when Repos
// names no number.
const DefaultDiffs = 2

// ErrDiffUnavailable means a diff could not be made now: git stopped at
// one of its bounds, or the data dir's filesystem is under the
// free-space floor. The message says which, and what to change.
var ErrDiffUnavailable = errors.New("diff unavailable")

// floorEvery is how many bytes a spooled diff writes between two looks
// at the free space of its filesystem.
const floorEvery = 8 << 20

// diffs is the state of a Repos' diffs: the slots of the diffs being made.
type diffs struct {
	once  sync.Once
	slots chan struct{}
}

// acquire takes a diff slot, waiting for one as long as ctx lives, and
// returns the call that gives it back.
func (r *Repos) acquire(ctx context.Context) (func(), error) {
	r.diffs.once.Do(func() { r.diffs.slots = make(chan struct{}, cmp.Or(max(r.Diffs, 0), DefaultDiffs)) })
	select {
	case r.diffs.slots <- struct{}{}:
		return func() { <-r.diffs.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("diff: waiting for one of the %d diffs made at once (AGENTBOX_GIT_DIFFS): %w", cap(r.diffs.slots), context.Cause(ctx))
	}
}

// diffDir is where job id's diffs are spooled, and its ended diff kept.
func (r *Repos) diffDir(id string) string { return filepath.Join(r.Dir, id+".diffs") }

// keptDiff is the file ended job j's diff is kept in: named by what
// changes when the job runs again (a turn, an attempt, its end).
func (r *Repos) keptDiff(j store.Job) string {
	return filepath.Join(r.diffDir(j.ID), fmt.Sprintf("turn%d-attempt%d-%d-%s.diff", j.Turn, j.Attempts, j.EndedAt.UnixNano(), j.Git.BaseCommit))
}

// checkFree refuses a spool into dir while its filesystem is under the
// floor.
func (r *Repos) checkFree(dir string) error {
	if r.MinFree <= 0 || r.DiskFree == nil {
		return nil
	}
	free, err := r.DiskFree(dir)
	if err != nil || free >= r.MinFree {
		return err
	}
	return fmt.Errorf("%w: %s free on the data dir's filesystem, under the %s floor (AGENTBOX_MIN_FREE_DISK); free some space "+
		"(agentbox removes ended jobs' data after AGENTBOX_RETENTION, or at once with DELETE /v1/jobs/{id})",
		ErrDiffUnavailable, config.SizeText(free), config.SizeText(r.MinFree))
}

// floorWriter writes to a spool file, and fails once the free space
// under it passes the floor, so that a diff cannot fill the data dir.
type floorWriter struct {
	f     *os.File
	r     *Repos
	since int64
	err   error
}

func (w *floorWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.since += int64(len(p)); w.since >= floorEvery {
		w.since = 0
		if w.err = w.r.checkFree(filepath.Dir(w.f.Name())); w.err != nil {
			return 0, w.err
		}
	}
	return w.f.Write(p)
}

// kept opens ended job j's kept diff, made first if it is not there yet.
func (s *Service) kept(ctx context.Context, j store.Job) (*os.File, error) {
	name := s.repos.keptDiff(j)
	if f, err := os.Open(name); err == nil {
		return f, nil
	}
	return s.spool(ctx, j, false, name)
}

// spool makes job j's diff (or patch) in a file of the data dir and
// returns it open at its start. With keep, the file is kept under that
// name (and any other the job's diff had is removed); without, it is
// named by nothing once open. Made one slot at a time.
func (s *Service) spool(ctx context.Context, j store.Job, patch bool, keep string) (*os.File, error) {
	release, err := s.repos.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if keep != "" {
		if f, err := os.Open(keep); err == nil {
			return f, nil // made by another request while this one waited
		}
	}
	dir := s.repos.diffDir(j.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	if err := s.repos.checkFree(dir); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "spool-")
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	if err := s.fill(ctx, j, patch, f, keep); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fill writes job j's diff into spool file f, then names it keep (or
// nothing), and rewinds it.
func (s *Service) fill(ctx context.Context, j store.Job, patch bool, f *os.File, keep string) error {
	fw := &floorWriter{f: f, r: s.repos}
	err := s.makeDiff(ctx, j, patch, fw)
	if fw.err != nil {
		err = fw.err
	}
	if err == nil && keep != "" {
		if err = os.Rename(f.Name(), keep); err == nil {
			s.repos.dropKept(keep)
		}
	}
	if err != nil || keep == "" {
		os.Remove(f.Name()) // the open file lives on, named by nothing
	}
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

// dropKept removes the job's kept diffs other than keep: those of its
// earlier runs.
func (r *Repos) dropKept(keep string) {
	ents, _ := os.ReadDir(filepath.Dir(keep))
	for _, e := range ents {
		if name := e.Name(); strings.HasSuffix(name, ".diff") && name != filepath.Base(keep) {
			os.Remove(filepath.Join(filepath.Dir(keep), name))
		}
	}
}

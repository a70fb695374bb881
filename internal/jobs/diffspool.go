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
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
)

// A job's diff is made by the host's git from what its sandbox wrote,
// so it costs what the sandbox chose: git's time and memory (bounded by
// githost), and the diff's bytes. Diffs are made a few at a time (AGENTBOX_GIT_DIFFS),
// into a file in the data dir (never /tmp, which the free-space floor
// does not watch), and the diff of an ended job is made once and kept
// next to its git dir until the job runs again (its patch too). A diff
// is bounded in size (AGENTBOX_GIT_MAX_DIFF): a workspace of one small
// file hard-linked 40,000 times at 4 KiB paths took 484 MB of diff. A
// refusal the same run of the job would meet again (that bound, git's
// own) is remembered beside the kept file, so asking again costs nothing.

// ErrDiffUnavailable means a diff could not be made now: git stopped at
// one of its bounds, the diff is over its size bound, or the data dir's
// filesystem is under the free-space floor. The message says which, and what to change.
var ErrDiffUnavailable = errors.New("diff unavailable")

// floorEvery is how many bytes a spooled diff writes between two looks
// at the free space of its filesystem.
const floorEvery = 8 << 20

// diffs is the state of a Repos' diffs: the slots of the diffs being
// made, and the kept files being made, each closed once it is.
type diffs struct {
	once   sync.Once
	slots  chan struct{}
	mu     sync.Mutex
	making map[string]chan struct{}
}

// acquire takes a diff slot, waiting for one as long as ctx lives, and
// returns the call that gives it back.
func (r *Repos) acquire(ctx context.Context) (func(), error) {
	r.diffs.once.Do(func() { r.diffs.slots = make(chan struct{}, cmp.Or(max(r.Diffs, 0), config.Default().Git.Diffs)) })
	select {
	case r.diffs.slots <- struct{}{}:
		return func() { <-r.diffs.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("diff: waiting for one of the %d diffs made at once (AGENTBOX_GIT_DIFFS): %w", cap(r.diffs.slots), context.Cause(ctx))
	}
}

// making takes the making of kept file name, waiting as long as ctx
// lives while another request makes it: requests at once for an ended
// job's diff make it once, and share it.
func (r *Repos) making(ctx context.Context, name string) (func(), error) {
	for {
		r.diffs.mu.Lock()
		done, busy := r.diffs.making[name]
		if !busy {
			done = make(chan struct{})
			if r.diffs.making == nil {
				r.diffs.making = map[string]chan struct{}{}
			}
			r.diffs.making[name] = done
		}
		r.diffs.mu.Unlock()
		if !busy {
			return func() { r.madeKept(name, done) }, nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("diff: waiting for another request making it: %w", context.Cause(ctx))
		}
	}
}

// madeKept gives back the making of kept file name.
func (r *Repos) madeKept(name string, done chan struct{}) {
	r.diffs.mu.Lock()
	delete(r.diffs.making, name)
	r.diffs.mu.Unlock()
	close(done)
}

// diffDir is where job id's diffs are spooled, and its ended diff kept.
func (r *Repos) diffDir(id string) string { return filepath.Join(r.Dir, id+".diffs") }

// keptDiff is the file ended job j's diff (or patch) is kept in: named
// by what changes when the job runs again (a turn, an attempt, its end).
func (r *Repos) keptDiff(j store.Job, kind diffKind) string {
	return filepath.Join(r.diffDir(j.ID), keptRun(j)+kind.ext())
}

// keptRun is the part of a kept file's name that names the job's run.
func keptRun(j store.Job) string {
	return fmt.Sprintf("turn%d-attempt%d-%d-%s", j.Turn, j.Attempts, j.EndedAt.UnixNano(), j.Git.BaseCommit)
}

// refusedSuffix names, next to a kept file's name, the marker of a diff
// that cannot be made for this run of the job: it holds the message.
const refusedSuffix = ".refused"

// refusal is a remembered refusal: its message, as first given.
type refusal string

func (r refusal) Error() string { return string(r) }

// Is makes a refusal an ErrDiffUnavailable.
func (refusal) Is(target error) bool { return target == ErrDiffUnavailable }

// maxDiff is the most bytes a diff (or patch) may take.
func (r *Repos) maxDiff() int64 {
	return cmp.Or(max(r.MaxDiff, 0), config.Default().Git.MaxDiff) // AGENTBOX_GIT_MAX_DIFF
}

// checkFree refuses a spool into dir while its filesystem is under the
// floor.
func (r *Repos) checkFree(dir string) error { return r.checkRoom(dir, 0) }

// checkRoom refuses a write of up to need bytes into dir that could take
// its filesystem under the floor.
func (r *Repos) checkRoom(dir string, need int64) error {
	if r.MinFree <= 0 || r.DiskFree == nil {
		return nil
	}
	free, err := r.DiskFree(dir)
	if err != nil || free >= r.MinFree+need {
		return err
	}
	if need > 0 {
		return fmt.Errorf("%w: %s free on the data dir's filesystem, %s over the %s floor (AGENTBOX_MIN_FREE_DISK); free some space "+
			"(agentbox removes ended jobs' data after AGENTBOX_RETENTION, or at once with DELETE /v1/jobs/{id})",
			ErrDiffUnavailable, units.FormatSize(free), units.FormatSize(max(free-r.MinFree, 0)), units.FormatSize(r.MinFree))
	}
	return fmt.Errorf("%w: %s free on the data dir's filesystem, under the %s floor (AGENTBOX_MIN_FREE_DISK); free some space "+
		"(agentbox removes ended jobs' data after AGENTBOX_RETENTION, or at once with DELETE /v1/jobs/{id})",
		ErrDiffUnavailable, units.FormatSize(free), units.FormatSize(r.MinFree))
}

// spoolWriter writes to a spool file, and fails once the diff passes
// its size bound or the free space under it passes the floor, so that a
// diff cannot fill the data dir; git, its writes failing, stops.
type spoolWriter struct {
	f      *os.File
	r      *Repos
	what   string // "diff" or "patch"
	n      int64
	since  int64
	err    error
	tooBig bool
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.n += int64(len(p)); w.n > w.r.maxDiff() {
		w.tooBig = true
		w.err = fmt.Errorf("%w: the %s is over %s, the most a diff may take (AGENTBOX_GIT_MAX_DIFF); "+
			"the job's files are in its zip (GET /v1/jobs/{id}/artifacts)", ErrDiffUnavailable, w.what, units.FormatSize(w.r.maxDiff()))
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

// kept opens ended job j's kept diff (or patch), made first if it is not
// there yet; a refusal remembered for this run of the job is given again.
func (s *Service) kept(ctx context.Context, j store.Job, kind diffKind) (*os.File, error) {
	name := s.repos.keptDiff(j, kind)
	if f, err := openKept(name); f != nil || err != nil {
		return f, err
	}
	return s.spool(ctx, j, kind, name)
}

// openKept opens kept file name, or returns the refusal remembered in
// its place; nil and nil when there is neither.
func openKept(name string) (*os.File, error) {
	if f, err := os.Open(name); err == nil {
		return f, nil
	}
	if msg, err := os.ReadFile(name + refusedSuffix); err == nil {
		return nil, refusal(msg)
	}
	return nil, nil
}

// spool makes job j's diff (or patch) in a file of the data dir and
// returns it open at its start. With keep, the file is kept under that
// name (and any other the job's diff had is removed); without, it is
// named by nothing once open. Made one slot at a time, and a kept file
// by one request at a time.
func (s *Service) spool(ctx context.Context, j store.Job, kind diffKind, keep string) (*os.File, error) {
	if keep != "" {
		made, err := s.repos.making(ctx, keep)
		if err != nil {
			return nil, err
		}
		defer made()
	}
	release, err := s.repos.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if keep != "" {
		if f, err := openKept(keep); f != nil || err != nil {
			return f, err // made (or refused) by another request while this one waited
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
	if err := s.fill(ctx, j, kind, f, keep); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fill writes job j's diff into spool file f, then names it keep (or
// nothing), and rewinds it. A refusal that the same run of the job
// would meet again is remembered beside keep.
func (s *Service) fill(ctx context.Context, j store.Job, kind diffKind, f *os.File, keep string) error {
	fw := &spoolWriter{f: f, r: s.repos, what: "diff"}
	if kind == kindPatch {
		fw.what = "patch"
	}
	err := s.makeDiff(ctx, j, kind, fw)
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
		if keep != "" && (fw.tooBig || errors.Is(err, githost.ErrBound)) {
			s.repos.refuse(keep, err)
		}
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

// refuse remembers beside keep that its diff cannot be made: what is
// over its size bound, or stopped git at its memory or CPU bound, is so
// for as long as the job does not run again. A marker that cannot be
// written only costs the next request the work again.
func (r *Repos) refuse(keep string, err error) {
	tmp := keep + refusedSuffix + ".tmp"
	if os.WriteFile(tmp, []byte(err.Error()), 0o600) == nil && os.Rename(tmp, keep+refusedSuffix) == nil {
		r.dropKept(keep)
	}
}

// dropKept removes the job's kept diffs, patches and refusals of its
// earlier runs: those not named as keep's run is.
func (r *Repos) dropKept(keep string) {
	run, _, _ := strings.Cut(filepath.Base(keep), ".") // keptRun holds no dot
	dir, run := filepath.Dir(keep), run+"."
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, run) && (strings.HasSuffix(name, ".diff") || strings.HasSuffix(name, ".patch") || strings.HasSuffix(name, refusedSuffix)) {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

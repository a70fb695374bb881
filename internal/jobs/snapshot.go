package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/workspace"
)

// A running job's files (GET /v1/jobs/{id}/files/..., its zip, the UI's
// Files tab) are read from a snapshot of its workspace, never from the
// live one: the sandbox could swap a file for a link between a check and
// a read. A snapshot is a copy made the way a checkpoint reads the tree
// (workspace.CopyLive: through an os.Root, no link followed, each entry
// checked to be the one its directory listed, an entry that changes under
// the walk left out) into a directory of the data dir nothing else
// writes. It is bounded (SnapshotMaxBytes, SnapshotMaxEntries,
// SnapshotTimeout, SnapshotsAtOnce at a time, snapshotsMax in all, room
// over the free-space floor) and reused while fresh
// (snapshotFresh), so a job the UI looks at costs one copy every few
// seconds at most, and an idle one nothing more. A request holds the
// snapshot it reads until it ends; a replaced one is removed once no
// request holds it, and a job's are removed once it has ended: when its
// files are next asked for (its own workspace is read then), or its data
// is deleted (DELETE, retention), whichever comes first.

// Bounds of one snapshot of a running job's workspace.
const (
	SnapshotMaxBytes   = 512 << 20
	SnapshotMaxEntries = 100_000
	SnapshotTimeout    = 30 * time.Second
	// SnapshotsAtOnce is how many snapshots a service takes at once.
	SnapshotsAtOnce = 2
	// snapshotsKept is how many jobs' snapshots are kept; past it, the
	// one used longest ago (and held by no request) is removed.
	snapshotsKept = 8
	// snapshotsMax is how many snapshots may exist at once, those that
	// requests still hold after they were replaced included: a client
	// reading zips slowly holds one each.
	snapshotsMax = 2 * snapshotsKept
	// snapshotFootprint is the most disk one snapshot takes: its bytes,
	// and a block for each of its entries (an empty directory, a small
	// file).
	snapshotFootprint = SnapshotMaxBytes + SnapshotMaxEntries*4096
)

// snapshotFresh is how long a snapshot that took took is reused: at
// least two seconds, and ten times what it cost, so that taking them
// costs at most a tenth of a core however often they are asked for.
func snapshotFresh(took time.Duration) time.Duration { return max(2*time.Second, 10*took) }

// snapshots are a service's snapshots of running jobs' workspaces.
type snapshots struct {
	dir   string // holds one directory per snapshot
	slots chan struct{}

	mu    sync.Mutex
	n     int              // names snapshots
	live  int              // snapshots made and not yet being removed
	byJob map[string]*snap // the newest of each job
}

// snap is one snapshot: its directory, when it was taken and what it
// cost; ready is closed once it is taken (err says how).
type snap struct {
	dir     string
	taken   time.Time
	took    time.Duration
	used    time.Time
	skipped []string
	err     error
	ready   chan struct{}
	refs    int
	stale   bool // replaced or dropped: removed once no request holds it
}

// newSnapshots returns the snapshots made in dir (ServiceConfig.Snapshots),
// once it emptied it of what a past run left.
func newSnapshots(dir string) (*snapshots, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	return &snapshots{dir: dir, slots: make(chan struct{}, SnapshotsAtOnce), byJob: map[string]*snap{}}, nil
}

// liveFiles returns a store serving running job j's files from a
// snapshot of its workspace, held until ctx ends.
func (s *Service) liveFiles(ctx context.Context, j store.Job) (workspace.Store, error) {
	if j.Status == store.StatusPending {
		return nil, fmt.Errorf("%w: job %s is pending: wait for the job to start; its files can be read while it runs", ErrNotEnded, j.ID)
	}
	if s.snaps == nil {
		return nil, fmt.Errorf("%w: job %s is %s; this server reads its files once it has ended", ErrNotEnded, j.ID, j.Status)
	}
	sn, err := s.snaps.get(ctx, j.ID, func(dir string) ([]string, error) { return s.copyLive(ctx, j.ID, dir) })
	if err != nil {
		return nil, err
	}
	return snapStore{sn}, nil
}

// copyLive copies job id's live workspace into dir.
func (s *Service) copyLive(ctx context.Context, id, dir string) ([]string, error) {
	// The floor is checked once, before: the snapshots being taken at
	// the same time must all fit over it.
	if s.repos != nil {
		if err := s.repos.checkRoom(filepath.Dir(dir), SnapshotsAtOnce*snapshotFootprint); err != nil {
			return nil, fmt.Errorf("%w: the job's files are read from a snapshot of its workspace, which needs room (up to %s over the floor): %w",
				ErrNotEnded, units.FormatSize(SnapshotsAtOnce*snapshotFootprint), err)
		}
	}
	src, err := s.liveDir(ctx, id)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		return nil, fmt.Errorf("snapshot of job %s: %w", id, err)
	}
	defer root.Close()
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), SnapshotTimeout, errSnapshotSlow)
	defer cancel()
	skipped, err := workspace.CopyLive(ctx, root, dir, workspace.Limits{MaxBytes: SnapshotMaxBytes, MaxEntries: SnapshotMaxEntries})
	switch {
	case errors.Is(err, workspace.ErrTooLarge):
		return nil, fmt.Errorf("%w: the workspace of running job %s is over what a snapshot takes (%s, %d entries): "+
			"its files and zip can be read once it has ended", ErrNotEnded, id, units.FormatSize(SnapshotMaxBytes), SnapshotMaxEntries)
	case errors.Is(context.Cause(ctx), errSnapshotSlow):
		return nil, fmt.Errorf("%w: a snapshot of running job %s's workspace took over %v: its files and zip can be read once it has ended",
			ErrNotEnded, id, SnapshotTimeout)
	case err != nil:
		return nil, fmt.Errorf("snapshot of job %s: %w", id, err)
	}
	return skipped, nil
}

var errSnapshotSlow = errors.New("snapshot took too long")

// liveDir is the host directory of running job id's live workspace, when
// its sandbox runs on this server.
func (s *Service) liveDir(ctx context.Context, id string) (string, error) {
	if s.sched == nil {
		return "", fmt.Errorf("%w: job %s runs on another server: its files can be read here once it has ended", ErrNotEnded, id)
	}
	sb := s.sched.liveSandbox(id)
	if sb == nil {
		return "", fmt.Errorf("%w: job %s's sandbox is starting: wait for the job to start, then ask again", ErrNotEnded, id)
	}
	if l, ok := sb.(sandbox.LiveWorkspacer); ok {
		return l.LiveWorkspace(), nil
	}
	return s.ws.Prepare(ctx, id)
}

// get returns job id's snapshot, taken with take if there is no fresh
// one, held until ctx ends.
func (ss *snapshots) get(ctx context.Context, id string, take func(dir string) ([]string, error)) (*snap, error) {
	ss.mu.Lock()
	sn := ss.byJob[id]
	// A failed snapshot is given again while fresh too: one past the
	// bounds costs its reading once, not once a request.
	fresh := sn != nil && (!sn.done() || time.Since(sn.taken) < snapshotFresh(sn.took))
	if !fresh {
		if sn != nil {
			ss.retire(id, sn)
		}
		ss.evict()
		if ss.live >= snapshotsMax {
			ss.mu.Unlock()
			return nil, fmt.Errorf("%w: the server holds %d snapshots of running jobs' files for requests still reading them, the most it keeps: "+
				"retry once some of those downloads have ended, or read job %s's files once it has ended", ErrNotEnded, snapshotsMax, id)
		}
		ss.n++
		ss.live++
		sn = &snap{dir: filepath.Join(ss.dir, id+"."+strconv.Itoa(ss.n)), ready: make(chan struct{})}
		ss.byJob[id] = sn
		ss.evict()
		go ss.take(sn, take)
	}
	sn.refs++
	sn.used = time.Now()
	ss.mu.Unlock()
	context.AfterFunc(ctx, func() { ss.release(sn) })
	select {
	case <-sn.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if sn.err != nil {
		return nil, sn.err
	}
	return sn, nil
}

// take takes snapshot sn, one of SnapshotsAtOnce at a time. It is owned
// by the snapshot: whoever waits for it waits on ready, and its end is
// bounded by SnapshotTimeout.
func (ss *snapshots) take(sn *snap, take func(dir string) ([]string, error)) {
	ss.slots <- struct{}{}
	begin := time.Now()
	skipped, err := take(sn.dir)
	<-ss.slots
	ss.mu.Lock()
	sn.skipped, sn.err, sn.taken, sn.took = skipped, err, time.Now(), time.Since(begin)
	ss.mu.Unlock()
	close(sn.ready)
}

func (sn *snap) done() bool {
	select {
	case <-sn.ready:
		return true
	default:
		return false
	}
}

// release lets go of one hold on sn, removing it if it is stale.
func (ss *snapshots) release(sn *snap) {
	ss.mu.Lock()
	sn.refs--
	remove := sn.refs == 0 && sn.stale
	if remove {
		ss.live--
	}
	ss.mu.Unlock()
	if remove {
		ss.remove(sn)
	}
}

// retire marks job id's snapshot sn stale, removing it now if no request
// holds it. ss.mu is held.
func (ss *snapshots) retire(id string, sn *snap) {
	if ss.byJob[id] == sn {
		delete(ss.byJob, id)
	}
	sn.stale = true
	if sn.refs == 0 {
		ss.live--
		go ss.remove(sn)
	}
}

// evict retires the snapshots used longest ago, held by no request, past
// snapshotsKept. ss.mu is held.
func (ss *snapshots) evict() {
	for len(ss.byJob) > snapshotsKept {
		var oldID string
		var old *snap
		for id, sn := range ss.byJob {
			if sn.refs == 0 && sn.done() && (old == nil || sn.used.Before(old.used)) {
				oldID, old = id, sn
			}
		}
		if old == nil {
			return
		}
		ss.retire(oldID, old)
	}
}

// remove removes sn's directory once it is taken.
func (ss *snapshots) remove(sn *snap) {
	<-sn.ready
	_ = os.RemoveAll(sn.dir) // the copy's directories keep their owner's rwx
}

// drop retires job id's snapshot: the job has ended.
func (s *Service) dropSnapshot(id string) {
	if s.snaps == nil {
		return
	}
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	if sn := s.snaps.byJob[id]; sn != nil {
		s.snaps.retire(id, sn)
	}
}

// snapStore serves a snapshot as a read-only workspace.Store: Open and
// Zip read it, whatever the ID; the rest refuse.
type snapStore struct{ sn *snap }

var errReadOnly = errors.New("a running job's snapshot is read-only")

// TakenAt reports when the snapshot was taken.
func (s snapStore) TakenAt() time.Time { return s.sn.taken }

// Skipped names what the snapshot left out, with why.
func (s snapStore) Skipped() []string { return s.sn.skipped }

func (s snapStore) Prepare(context.Context, string) (string, error) { return "", errReadOnly }
func (s snapStore) Unpack(context.Context, string, io.Reader, workspace.Format, workspace.Limits) error {
	return errReadOnly
}
func (s snapStore) Copy(context.Context, string, *os.Root, workspace.Limits) ([]string, error) {
	return nil, errReadOnly
}
func (s snapStore) Open(context.Context, string) (*os.Root, error) { return os.OpenRoot(s.sn.dir) }
func (s snapStore) Zip(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error) {
	root, err := s.Open(ctx, id)
	if err != nil {
		return artifact.Report{}, err
	}
	defer root.Close()
	return opts.Write(w, root)
}
func (s snapStore) Exists(context.Context, string) (bool, error) { return true, nil }
func (s snapStore) Remove(context.Context, string) error         { return errReadOnly }
func (s snapStore) List(context.Context) ([]string, error)       { return nil, nil }

// Snapshot is what a store of a running job's files says of itself: the
// time its snapshot was taken.
type Snapshot interface {
	TakenAt() time.Time
}

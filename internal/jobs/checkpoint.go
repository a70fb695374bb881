package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// With SchedulerConfig.Checkpoints, a worker checkpoints each job's trees
// to the blob store the cluster shares: the workspace after every step and
// once the sandbox is gone, the git dir after its start and its hand-back.
// A worker that takes a job over (its first worker was lost, or a new turn
// lands elsewhere) restores them before its sandbox starts. A failed
// checkpoint is an event and a log line, never the job's failure.

// checkpoints is a worker's record of its checkpoints: per job and tree,
// the Snapshot of the directory it last saved (so the next save reads
// only what changed); per job, a mark naming the checkpoint its local
// workspace holds or is newer than, in memory and in a file of the mark
// directory (so a restarted worker knows its own workspace).
type checkpoints struct {
	marks string

	mu    sync.Mutex
	prev  map[string]snapshotOf // by job ID + "/" + tree
	known map[string]string     // manifest by job ID
}

// snapshotOf is a tree's last Snapshot and the directory it was taken of.
type snapshotOf struct {
	dir  string
	snap *workspace.Snapshot
}

func newCheckpoints(marks string) *checkpoints {
	return &checkpoints{marks: marks, prev: map[string]snapshotOf{}, known: map[string]string{}}
}

// last returns the Snapshot of tree of job id if it was taken of dir.
func (c *checkpoints) last(id, tree, dir string) *workspace.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.prev[id+"/"+tree]; ok && p.dir == dir {
		return p.snap
	}
	return nil
}

func (c *checkpoints) keep(id, tree, dir string, snap *workspace.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prev[id+"/"+tree] = snapshotOf{dir, snap}
}

// forget drops what is kept in memory of job id's trees.
func (c *checkpoints) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.prev, id+"/"+workspace.TreeWorkspace)
	delete(c.prev, id+"/"+workspace.TreeGit)
}

// mark notes that the local workspace of job id holds checkpoint
// manifest ("" removes the mark: the local copy is gone).
func (c *checkpoints) mark(id, manifest string) error {
	c.mu.Lock()
	if manifest == "" {
		delete(c.known, id)
	} else {
		c.known[id] = manifest
	}
	c.mu.Unlock()
	if c.marks == "" {
		return nil
	}
	path := filepath.Join(c.marks, id)
	if manifest == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checkpoint mark: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(c.marks, 0o700); err != nil {
		return fmt.Errorf("checkpoint mark: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(manifest), 0o600); err != nil {
		return fmt.Errorf("checkpoint mark: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint mark: %w", err)
	}
	return nil
}

// marked returns the manifest the local workspace of job id holds, "" if
// unknown.
func (c *checkpoints) marked(id string) string {
	c.mu.Lock()
	m, ok := c.known[id]
	c.mu.Unlock()
	if ok || c.marks == "" {
		return m
	}
	b, err := os.ReadFile(filepath.Join(c.marks, id))
	if err != nil {
		return ""
	}
	return string(b)
}

// saveTree checkpoints the tree under dir as tree of job id after step,
// reading only what changed since the last save of that directory, and
// emits its event. The mark follows a saved workspace. It reads no more
// than lim allows (see saveLimits).
func (s *Scheduler) saveTree(ctx context.Context, id, tree, dir string, step int, lim workspace.SaveLimits) error {
	sh := s.cfg.Checkpoints
	begin := time.Now()
	ev := event.Checkpoint{Tree: tree, Step: step}
	err := func() error {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return fmt.Errorf("open %s: %w", tree, err)
		}
		defer root.Close()
		snap, st, err := sh.SaveWithin(ctx, id, tree, root, s.ckpt.last(id, tree, dir),
			workspace.Checkpoint{Step: step, At: time.Now().UTC(), Worker: s.cfg.WorkerID}, lim)
		if err != nil {
			return err
		}
		s.ckpt.keep(id, tree, dir, snap)
		ev.Files, ev.Bytes, ev.Uploaded, ev.UploadedBytes = st.Files, st.Bytes, st.Uploaded, st.UploadedBytes
		if tree == workspace.TreeWorkspace {
			return s.ckpt.mark(id, snap.Manifest())
		}
		return nil
	}()
	ev.MS = time.Since(begin).Milliseconds()
	s.metrics.checkpointed(time.Since(begin), ev.UploadedBytes, err)
	if err != nil {
		ev.Error = err.Error()
		s.log.Error("checkpoint", "job_id", id, "tree", tree, "step", step, "err", err)
	}
	s.emit(context.WithoutCancel(ctx), id, ev)
	return err
}

// saveLimits bound what a checkpoint of job j's workspace reads: its
// files are within its disk quota, but a sparse file costs none (it is
// skipped), and the quota does not bound a workspace without a disk.
func saveLimits(j store.Job) workspace.SaveLimits {
	if j.Limits.DiskBytes <= 0 {
		return workspace.SaveLimits{}
	}
	return workspace.SaveLimits{MaxNewBytes: j.Limits.DiskBytes + 1<<30} // the holes of sparse files kept
}

// stepCheckpoint checkpoints job j's workspace as sb shows it after step.
func (s *Scheduler) stepCheckpoint(ctx context.Context, j store.Job, sb sandbox.Sandbox, ws string, step int) {
	if s.cfg.Checkpoints == nil {
		return
	}
	if l, ok := sb.(sandbox.LiveWorkspacer); ok {
		ws = l.LiveWorkspace()
	}
	_ = s.saveTree(ctx, j.ID, workspace.TreeWorkspace, ws, step, saveLimits(j))
}

// gitCheckpoint checkpoints job id's git dir after step, if it has one.
func (s *Scheduler) gitCheckpoint(ctx context.Context, id string, step int) {
	if s.cfg.Checkpoints == nil || s.cfg.Repos == nil {
		return
	}
	dir := s.cfg.Repos.GitDir(id)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	_ = s.saveTree(context.WithoutCancel(ctx), id, workspace.TreeGit, dir, step, workspace.SaveLimits{})
}

// finalCheckpoint checkpoints the workspace of job j once its sandbox is
// gone, so that every replica serves the end state; then, for an ended
// job, the worker drops its local copies (a later turn restores them). It
// does nothing when the sandbox was never started or could not be
// removed, or when another worker owns the job now.
func (s *Scheduler) finalCheckpoint(ctx context.Context, j store.Job, out Outcome, cause error) {
	if s.cfg.Checkpoints == nil || out.ws == "" || out.left != nil || errors.Is(cause, errLeaseLost) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	// A worker told to stop may not know yet that its lease was lost: the
	// checkpoint is the new worker's then.
	if x, err := s.store.GetJob(ctx, j.ID); err != nil || !holds(&x, j, s.cfg.WorkerID) {
		s.log.Warn("no final checkpoint: the job is not this worker's any more", "job_id", j.ID, "err", err)
		return
	}
	if s.saveTree(ctx, j.ID, workspace.TreeWorkspace, out.ws, j.Steps+out.Steps, saveLimits(j)) != nil ||
		errors.Is(cause, errShutdown) || errors.Is(cause, errEngineDown) {
		return // kept: a released job may run here again
	}
	s.dropLocal(ctx, j.ID)
}

// dropLocal removes the local workspace and git dir of job id, whose
// final checkpoint holds them, and its mark first: a later run restores.
func (s *Scheduler) dropLocal(ctx context.Context, id string) {
	err := s.ckpt.mark(id, "")
	if err == nil {
		err = s.cfg.Workspaces.Remove(ctx, id)
	}
	if err == nil && s.cfg.Repos != nil {
		err = s.cfg.Repos.remove(id)
	}
	if err != nil {
		s.log.Warn("remove the local copy of a checkpointed job", "job_id", id, "err", err)
	}
}

// restore replaces the local workspace (ws) and git dir of job j with its
// latest checkpoints when the workspace's is not the one this worker last
// saved or restored: the job ran elsewhere since (another worker, an
// upload staged by an API replica). It returns which step the workspace
// was restored from, nil when it was not.
func (s *Scheduler) restore(ctx context.Context, j store.Job, ws string) (*Restored, error) {
	sh := s.cfg.Checkpoints
	if sh == nil {
		return nil, nil
	}
	c, err := sh.Latest(ctx, j.ID, workspace.TreeWorkspace)
	switch {
	case noCheckpoint(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("restore the workspace: %w", err)
	case c.Manifest == s.ckpt.marked(j.ID):
		return nil, nil
	}
	if err := s.restoreGit(ctx, j.ID); err != nil {
		return nil, err
	}
	if err := s.cfg.Workspaces.Remove(ctx, j.ID); err != nil {
		return nil, fmt.Errorf("restore the workspace: %w", err)
	}
	snap, err := sh.Restore(ctx, j.ID, c, ws)
	if err != nil {
		return nil, fmt.Errorf("restore the workspace: %w", err)
	}
	s.ckpt.keep(j.ID, workspace.TreeWorkspace, ws, snap)
	if err := s.ckpt.mark(j.ID, c.Manifest); err != nil {
		return nil, err
	}
	s.emit(ctx, j.ID, event.Log{Level: "info", Message: fmt.Sprintf("workspace restored from its checkpoint after step %d (by %s)", c.Step, c.Worker)})
	s.log.Info("workspace restored from its checkpoint", "job_id", j.ID, "step", c.Step, "from", c.Worker)
	return &Restored{Step: c.Step}, nil
}

// noCheckpoint reports whether err says there is no checkpoint.
func noCheckpoint(err error) bool {
	return errors.Is(err, workspace.ErrNotFound) || errors.Is(err, blobs.ErrNotFound)
}

// restoreGit replaces job id's git dir with its latest checkpoint, if it
// has one.
func (s *Scheduler) restoreGit(ctx context.Context, id string) error {
	if s.cfg.Repos == nil {
		return nil
	}
	c, err := s.cfg.Checkpoints.Latest(ctx, id, workspace.TreeGit)
	if noCheckpoint(err) {
		return nil
	}
	if err == nil {
		err = s.cfg.Repos.remove(id)
	}
	if err == nil {
		err = os.MkdirAll(s.cfg.Repos.Dir, 0o700)
	}
	if err != nil {
		return fmt.Errorf("restore the git dir: %w", err)
	}
	dir := s.cfg.Repos.GitDir(id)
	snap, err := s.cfg.Checkpoints.Restore(ctx, id, c, dir)
	if err != nil {
		return fmt.Errorf("restore the git dir: %w", err)
	}
	s.ckpt.keep(id, workspace.TreeGit, dir, snap)
	return nil
}

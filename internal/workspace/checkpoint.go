package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
)

// Checkpoints: a job's trees (its workspace, its git dir) kept in a blob
// store the cluster shares, so that another host resumes the job from
// them. A checkpoint is a tree of JSON blobs, one per directory (see
// tree.go), and the ref named by the tree, which holds the Checkpoint
// naming the root tree: setting the ref is what makes a checkpoint the
// latest, once all its blobs are in.

// Trees a job's checkpoints hold.
const (
	TreeWorkspace = "workspace" // what the sandbox mounts at /workspace
	TreeGit       = "git"       // the host's git dir of the job (jobs.Repos.GitDir)
)

// Checkpoint is a tree's checkpoint, as the ref named by the tree holds it (JSON).
type Checkpoint struct {
	Manifest string    `json:"manifest"` // digest of the root directory's tree blob
	Step     int       `json:"step"`     // the job's step it was taken after (0: before any)
	At       time.Time `json:"at"`
	Worker   string    `json:"worker,omitempty"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"` // of all the tree's files
}

// SaveStats says what a checkpoint cost.
type SaveStats struct {
	Entries, Files, Uploaded int   // Uploaded: files whose blob was put
	Bytes                    int64 // of all the tree's files, as the Checkpoint holds it
	UploadedBytes            int64
	Trees, TreesUploaded     int      // directories' trees, and those put
	TreeBytes                int64    // of the trees put
	Skipped                  []string // FIFOs, sockets, devices, over-long paths: "path: why", the first 100 and how many more
	Took                     time.Duration
}

// Snapshot is what a host saw at its last checkpoint of a tree (each
// directory's tree, each file's device, inode, size, mtime, ctime), so
// that the next checkpoint reads, hashes and uploads only what changed.
// Opaque; nil: none.
type Snapshot struct {
	ns       string // the job whose namespace holds the blobs
	manifest string
	files    map[string]fileStat
	trees    map[string]treeState // by directory path, "." the root
}

// Manifest is the digest of the root tree the snapshot was saved or
// restored as; "" for a nil Snapshot.
func (s *Snapshot) Manifest() string {
	if s == nil {
		return ""
	}
	return s.manifest
}

// fileStat is what tells a file unchanged since a checkpoint, and its
// blob's digest.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // ns
	mode         uint32
	digest       string
}

// statOf is fi's fileStat with digest.
func statOf(fi fs.FileInfo, digest string) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mode: st.Mode,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), digest: digest,
	}, true
}

// latest reads the ref tree of ns.
func latest(ctx context.Context, b blobs.Store, ns, tree string) (Checkpoint, error) {
	data, err := b.Ref(ctx, ns, tree)
	if errors.Is(err, blobs.ErrNotFound) {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w (%w)", tree, ns, ErrNotFound, err)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w", tree, ns, err)
	}
	var c Checkpoint
	if err := json.Unmarshal(data, &c); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w", tree, ns, err)
	}
	if err := blobs.CheckDigest(c.Manifest); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s of %s: %w", tree, ns, err)
	}
	return c, nil
}

package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
)

// Checkpoints: a job's trees (its workspace, its git dir) kept in a blob
// store the cluster shares, so that another host resumes the job from
// them. A checkpoint is a manifest, a JSON blob listing every entry of the
// tree (files by the digest of their blob), and the ref named by the
// tree, which holds the Checkpoint naming the manifest: setting the ref
// is what makes a checkpoint the latest, once all its blobs are in.

// Trees a job's checkpoints hold.
const (
	TreeWorkspace = "workspace" // what the sandbox mounts at /workspace
	TreeGit       = "git"       // the host's git dir of the job (jobs.Repos.GitDir)
)

// Checkpoint is a tree's checkpoint, as the ref named by the tree holds it (JSON).
type Checkpoint struct {
	Manifest string    `json:"manifest"` // digest of the manifest blob
	Step     int       `json:"step"`     // the job's step it was taken after (0: before any)
	At       time.Time `json:"at"`
	Worker   string    `json:"worker,omitempty"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"` // of all the tree's files
}

// SaveStats says what a checkpoint cost.
type SaveStats struct {
	Entries, Files, Uploaded int // Uploaded: files whose blob was put
	UploadedBytes            int64
	Skipped                  []string // FIFOs, sockets, devices, over-long paths: "path: why"
	Took                     time.Duration
}

// Snapshot is what a host saw at its last checkpoint of a tree (the manifest
// plus each file's device, inode, size, mtime, ctime), so that the next
// checkpoint reads, hashes and uploads only what changed. Opaque; nil: none.
type Snapshot struct {
	ns       string // the job whose namespace holds the blobs
	manifest string
	files    map[string]fileStat
}

// Manifest is the digest of the manifest the snapshot was saved or
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

// The kinds of a manifest's entries.
const (
	entryDir     = "dir"
	entryFile    = "file"
	entrySymlink = "symlink"
)

// maxCheckpointEntries bounds a checkpointed tree's entries, and
// maxManifestBytes its manifest: both are held in memory whole.
const (
	maxCheckpointEntries = 500_000
	maxManifestBytes     = 256 << 20
)

// manifest lists a tree's entries, sorted by path, the root not among
// them.
type manifest struct {
	Version int             `json:"version"`
	Entries []manifestEntry `json:"entries"`
}

// manifestEntry is one entry of a tree: a directory, a file (its blob
// named by Digest) or a symlink (its Target as it is).
type manifestEntry struct {
	Path   string      `json:"path"`
	Kind   string      `json:"kind"`
	Mode   fs.FileMode `json:"mode"` // permission bits only
	Size   int64       `json:"size,omitempty"`
	Digest string      `json:"digest,omitempty"`
	Target string      `json:"target,omitempty"`
	MTime  int64       `json:"mtime"` // Unix ns
}

// putManifest stores m as a blob of namespace ns and returns its digest.
func putManifest(ctx context.Context, b blobs.Store, ns string, m *manifest) (string, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	d := blobs.Digest(data)
	if err := b.Put(ctx, ns, d, int64(len(data)), bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("put manifest: %w", err)
	}
	return d, nil
}

// readManifest reads the manifest blob digest of ns, checking its digest,
// and that its entries are ones a tree can hold.
func readManifest(ctx context.Context, b blobs.Store, ns, digest string) (*manifest, error) {
	rc, size, err := b.Open(ctx, ns, digest)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer rc.Close()
	if size > maxManifestBytes {
		return nil, fmt.Errorf("manifest: %d bytes, over %d", size, maxManifestBytes)
	}
	v := blobs.NewVerifier(rc, digest, size)
	data, err := io.ReadAll(v)
	if err == nil {
		err = v.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", digest, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", digest, err)
	}
	return &m, m.check()
}

// check refuses a manifest that is not one Save writes.
func (m *manifest) check() error {
	if m.Version != 1 {
		return fmt.Errorf("manifest: version %d, want 1", m.Version)
	}
	if len(m.Entries) > maxCheckpointEntries {
		return fmt.Errorf("manifest: %d entries, over %d", len(m.Entries), maxCheckpointEntries)
	}
	for i, e := range m.Entries {
		if err := e.check(); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return fmt.Errorf("manifest: entry %q out of order", e.Path)
		}
	}
	return nil
}

func (e manifestEntry) check() error {
	if p, err := cleanName(e.Path); err != nil || p != e.Path {
		return fmt.Errorf("entry %q: not a clean path", e.Path)
	}
	if e.Mode&^fs.ModePerm != 0 || e.Size < 0 {
		return fmt.Errorf("entry %q: mode %o, size %d", e.Path, e.Mode, e.Size)
	}
	switch e.Kind {
	case entryDir:
		return nil
	case entryFile:
		return blobs.CheckDigest(e.Digest)
	case entrySymlink:
		if e.Target == "" || len(e.Target) > maxTargetBytes {
			return fmt.Errorf("entry %q: a symlink's target of %d bytes", e.Path, len(e.Target))
		}
		return nil
	}
	return fmt.Errorf("entry %q: kind %q", e.Path, e.Kind)
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

package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/agentbox/agentbox/internal/blobs"
)

// A checkpoint's tree is stored as git stores one: one JSON blob per
// directory (a tree) listing its entries sorted by name, each file by
// the digest of its blob and each subdirectory by the digest of its own
// tree. The root tree's digest names the whole tree, so a change to one
// file changes only the trees on its path.

// The kinds of a tree's entries.
const (
	entryDir     = "dir"
	entryFile    = "file"
	entrySymlink = "symlink"
)

// treeVersion is the version of the trees Save writes.
const treeVersion = 2

// Bounds of a checkpointed tree, all held in memory while it is read:
// its entries (counted at every place a shared subtree appears), the
// bytes of one tree blob and of all those read, and its depth: walking
// and restoring look each entry up from the root, so their cost grows
// with the square of the depth, and a sandbox's `mkdir -p` as deep as a
// path allows (2,047 levels) made each step's checkpoint cost 16 s of the
// worker's CPU. Save leaves out what is deeper (and says so); no project
// nests directories 256 deep.
const (
	maxCheckpointEntries = 500_000
	maxTreeBytes         = 128 << 20
	maxTreesBytes        = 256 << 20
	maxTreeDepth         = 256
)

// errBadTree means a tree blob is not one Save writes.
var errBadTree = errors.New("not a checkpoint's tree")

// tree is the blob of one directory.
type tree struct {
	Version int         `json:"version"`
	Entries []treeEntry `json:"entries"`
}

// treeEntry is one entry of a directory: a directory (its tree named by
// Digest), a file (its blob named by Digest) or a symlink (its Target as
// it is).
type treeEntry struct {
	Name   string      `json:"name"`
	Kind   string      `json:"kind"`
	Mode   fs.FileMode `json:"mode"` // permission bits only
	Size   int64       `json:"size,omitempty"`
	Digest string      `json:"digest,omitempty"`
	Target string      `json:"target,omitempty"`
	MTime  int64       `json:"mtime,omitempty"` // Unix ns; none for a symlink
}

// treeState is a directory's tree as a Snapshot remembers it: its digest
// and its entries, so that an unchanged listing is not encoded again.
type treeState struct {
	digest  string
	entries []treeEntry
}

// encodeTree returns the blob of a directory of entries, and its digest.
func encodeTree(entries []treeEntry) ([]byte, string, error) {
	data, err := json.Marshal(tree{Version: treeVersion, Entries: entries})
	if err != nil {
		return nil, "", err
	}
	return data, blobs.Digest(data), nil
}

// decodeTree checks that data is a tree blob Save writes and returns its
// entries.
func decodeTree(data []byte, digest string) ([]treeEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t tree
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("tree %s: %w: %w", digest, errBadTree, err)
	}
	if t.Version != treeVersion {
		return nil, fmt.Errorf("tree %s: %w: version %d, want %d", digest, errBadTree, t.Version, treeVersion)
	}
	for i, e := range t.Entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("tree %s: %w: %w", digest, errBadTree, err)
		}
		if i > 0 && t.Entries[i-1].Name >= e.Name {
			return nil, fmt.Errorf("tree %s: %w: entry %q out of order", digest, errBadTree, e.Name)
		}
	}
	return t.Entries, nil
}

// check refuses an entry Save does not write: a name that is not one
// path element, an unknown kind, a mode beyond the permission bits.
func (e treeEntry) check() error {
	if e.Name == "" || e.Name == "." || e.Name == ".." || len(e.Name) > maxPathBytes ||
		strings.ContainsAny(e.Name, "/\x00\\") {
		return fmt.Errorf("entry %q: not a name", e.Name)
	}
	if e.Mode&^fs.ModePerm != 0 || e.Size < 0 {
		return fmt.Errorf("entry %q: mode %o, size %d", e.Name, e.Mode, e.Size)
	}
	switch e.Kind {
	case entryDir, entryFile:
		return blobs.CheckDigest(e.Digest)
	case entrySymlink:
		if e.Target == "" || len(e.Target) > maxTargetBytes {
			return fmt.Errorf("entry %q: a symlink's target of %d bytes", e.Name, len(e.Target))
		}
		return nil
	}
	return fmt.Errorf("entry %q: kind %q", e.Name, e.Kind)
}

// pathEntry is an entry of a tree read whole, by its path.
type pathEntry struct {
	path string
	treeEntry
}

// treeReader reads a checkpoint's trees from the root down, within the
// bounds: each tree blob is read once and checked against its digest, and
// every place one appears counts its entries.
type treeReader struct {
	ctx     context.Context
	b       blobs.Store
	ns      string
	read    map[string][]treeEntry // by digest
	bytes   int64                  // of the tree blobs read
	entries []pathEntry            // in the order a walk from the root meets them
	trees   map[string]treeState   // by directory path, "." the root
}

// readTrees reads the tree root of ns and everything beneath it.
func readTrees(ctx context.Context, b blobs.Store, ns, root string) (*treeReader, error) {
	r := &treeReader{ctx: ctx, b: b, ns: ns, read: map[string][]treeEntry{}, trees: map[string]treeState{}}
	return r, r.walk(".", root, 0)
}

// walk reads the tree digest of the directory p, depth levels down, and
// those beneath it.
func (r *treeReader) walk(p, digest string, depth int) error {
	if depth >= maxTreeDepth { // as Save, which leaves out entries 256 directories down
		return fmt.Errorf("entry %q: %w: deeper than %d", p, errBadTree, maxTreeDepth)
	}
	entries, err := r.tree(digest)
	if err != nil {
		return err
	}
	if len(r.entries)+len(entries) > maxCheckpointEntries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, maxCheckpointEntries)
	}
	r.trees[p] = treeState{digest: digest, entries: entries}
	for _, e := range entries {
		q := join(p, e.Name)
		if len(q) > maxPathBytes {
			return fmt.Errorf("entry %.64q...: %w: a path of %d bytes", q, errBadTree, len(q))
		}
		r.entries = append(r.entries, pathEntry{path: q, treeEntry: e})
		if e.Kind != entryDir {
			continue
		}
		if err := r.walk(q, e.Digest, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// tree returns the entries of the tree blob digest, read once.
func (r *treeReader) tree(digest string) ([]treeEntry, error) {
	if entries, ok := r.read[digest]; ok {
		return entries, nil
	}
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	rc, size, err := r.b.Open(r.ctx, r.ns, digest)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", digest, err)
	}
	defer rc.Close()
	if size > maxTreeBytes || r.bytes+size > maxTreesBytes {
		return nil, fmt.Errorf("tree %s: %w: %d bytes, over %d of trees", digest, ErrTooLarge, r.bytes+size, maxTreesBytes)
	}
	r.bytes += size
	v := blobs.NewVerifier(rc, digest, size)
	data, err := io.ReadAll(v)
	if err == nil {
		err = v.Check()
	}
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", digest, err)
	}
	entries, err := decodeTree(data, digest)
	if err != nil {
		return nil, err
	}
	r.read[digest] = entries
	return entries, nil
}

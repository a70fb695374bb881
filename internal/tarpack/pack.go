// Package tarpack packs a directory into the tar.gz an upload carries
// (Survey, Pack), refusing first what the server's unpacker
// (workspace.Unpack) would refuse; rules.go holds the rules both ends
// share. It is a leaf: it imports no other agentbox package, so that the
// API client can pack without the server's code.
package tarpack

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"
	"time"
)

// Packing is the other end of an upload: a person's directory made into a
// tar.gz that Unpack takes. Nothing is skipped silently: what Unpack would
// refuse (a symlink leading out, a FIFO, a socket, a device) is an error
// naming it, before anything is sent, unless PackOptions.Exclude leaves it
// out by name.

// PackOptions say what Survey and Pack leave out and how Pack reports.
type PackOptions struct {
	// Exclude holds patterns (path.Match) of what to leave out, matched
	// against each entry's slash-separated path within the tree and
	// against its name: ".venv", "node_modules", "*.log", "build/tmp".
	Exclude []string
	// Progress, if set, is written each file's content as it is packed.
	Progress io.Writer
}

// Tree is what a tree to pack holds.
type Tree struct {
	Files, Dirs, Links int64
	// Bytes is the files' content.
	Bytes int64
}

// excluded reports whether the entry at p is left out.
func (o PackOptions) excluded(p string) bool {
	for _, pat := range o.Exclude {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
		if ok, _ := path.Match(pat, path.Base(p)); ok {
			return true
		}
	}
	return false
}

// Survey walks the tree under root as Pack would, and refuses what Pack
// would refuse, so that a mistake is said before anything is sent; what
// it counts is what a progress bar needs.
func Survey(ctx context.Context, root *os.Root, o PackOptions) (Tree, error) {
	var t Tree
	err := walkPack(ctx, root, o, func(p string, fi fs.FileInfo) error {
		switch {
		case fi.IsDir():
			t.Dirs++
		case fi.Mode().IsRegular():
			t.Files++
			t.Bytes += fi.Size()
		default:
			t.Links++
		}
		return nil
	})
	return t, err
}

// Pack writes the tree under root to w as a tar.gz that Unpack takes:
// directories, regular files with their modes and times (to the second),
// symlinks as symlinks; a hard link's names each get the file's content.
// It reads through root and follows no link. A file that changes size
// while it is packed is an error.
func Pack(ctx context.Context, w io.Writer, root *os.Root, o PackOptions) error {
	// An upload is sent once and unpacked at once: the fastest level
	// costs a little size and saves most of the CPU (source shrinks ~4x
	// either way; random data not at all).
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	p := packer{root: root, tw: tw, progress: o.Progress}
	if err := walkPack(ctx, root, o, p.add); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	return nil
}

// packer writes the entries of a walk to a tar.
type packer struct {
	root     *os.Root
	tw       *tar.Writer
	progress io.Writer
}

// add writes the entry at p, whose Lstat is fi.
func (k packer) add(p string, fi fs.FileInfo) error {
	hdr := &tar.Header{Name: p, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime().Truncate(time.Second)}
	switch {
	case fi.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
	case fi.Mode().IsRegular():
		return k.file(hdr, p, fi)
	default:
		target, err := k.root.Readlink(p)
		if err != nil {
			return fmt.Errorf("pack %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
	}
	if err := k.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	return nil
}

// file writes the regular file p.
func (k packer) file(hdr *tar.Header, p string, fi fs.FileInfo) error {
	f, err := k.root.OpenFile(p, ReadFlags, 0)
	if err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	defer f.Close()
	if err := SameEntry(f, fi); err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	if err := k.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	var r io.Reader = f
	if k.progress != nil {
		r = io.TeeReader(f, k.progress)
	}
	n, err := io.Copy(k.tw, io.LimitReader(r, fi.Size()))
	if err == nil && n < fi.Size() {
		err = fmt.Errorf("it shrank from %d to %d bytes while it was packed", fi.Size(), n)
	}
	if err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	return nil
}

// walkPack calls fn for every entry under root that is not excluded,
// parents first, in name order, with its Lstat; it refuses what Unpack
// would refuse.
func walkPack(ctx context.Context, root *os.Root, o PackOptions, fn func(p string, fi fs.FileInfo) error) error {
	return walkDir(ctx, root, o, ".", fn)
}

func walkDir(ctx context.Context, root *os.Root, o PackOptions, dir string, fn func(p string, fi fs.FileInfo) error) error {
	names, err := readNames(root, dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := Join(dir, name)
		if o.excluded(p) {
			continue
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return fmt.Errorf("pack %s: %w", p, err)
		}
		if err := packable(root, p, fi); err != nil {
			return err
		}
		if err := fn(p, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			if err := walkDir(ctx, root, o, p, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// readNames reads the sorted names in the directory dir.
func readNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.OpenFile(dir, ReadFlags|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	slices.Sort(names)
	return names, nil
}

// packable refuses an entry Unpack would refuse.
func packable(root *os.Root, p string, fi fs.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsDir(), m.IsRegular():
		return nil
	case m&fs.ModeSymlink == 0:
		return fmt.Errorf("%s is %s, which cannot be uploaded: remove it, or leave it out with --exclude", p, ModeKind(m))
	}
	target, err := root.Readlink(p)
	if err != nil {
		return fmt.Errorf("pack %s: %w", p, err)
	}
	if target == "" || len(target) > MaxTargetBytes || LinkLeadsOut(p, target) {
		return fmt.Errorf("%s is a symlink to %q, outside the directory, which the server refuses: remove it, replace it with what it points to, or leave it out with --exclude", p, target)
	}
	return nil
}

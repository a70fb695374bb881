// Package artifact packages a job's workspace for download. The workspace
// is written by untrusted code, so the zip is built to be safe to make and
// safe to extract:
//
//   - Every file is read through an os.Root over the workspace, so nothing
//     outside it can be reached; nothing blocks on a FIFO; devices, sockets
//     and FIFOs are left out.
//   - One zip reads at most Options.MaxBytes of file content, and expands at
//     most Options.MaxHoleBytes of holes (the unwritten ranges of sparse
//     files, which cost no disk but would cost CPU as zeros); a file that
//     does not fit is left out, not cut short.
//   - One zip stores at most Options.MaxEntries entries and
//     Options.MaxNameBytes of entry names, and reads no more of a
//     directory than it has room for: an entry costs the zip and the
//     memory of its maker whatever it holds, and hard links to an empty
//     file cost the sandbox almost nothing of its disk quota.
//   - Entry names are made safe on Linux, macOS and Windows: no invalid
//     UTF-8, control characters, `\`, <>:"|?*, trailing dots or spaces, or
//     device names such as CON or nul.txt; bad characters become '_', and
//     no two entries of a directory are equal even ignoring case.
//   - A symlink is stored as a link only when its target, judged from its
//     own directory, stays inside the workspace; links come after every
//     file and directory, so an extractor never writes through one.
//
// What was left out or renamed, and why, is listed in the zip itself, in
// ManifestName at its root.
package artifact

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
)

// openFlags opens workspace files without blocking on a FIFO the agent may
// have left behind.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// maxPathBytes bounds an entry's name, as PATH_MAX does on Linux; a deeper
// entry is left out, with what is under it.
const maxPathBytes = 4096

// Defaults of Options.
const (
	DefaultMaxBytes     = 2 << 30
	DefaultMaxHoleBytes = 8 << 20
	// A zip's maker holds a few hundred bytes and the name of each entry
	// until the zip is closed: the defaults keep that under half a GiB.
	DefaultMaxEntries   = 500_000
	DefaultMaxNameBytes = 64 << 20
)

// Options bound what one zip may cost. The zero value is the defaults.
type Options struct {
	// MaxBytes is how many bytes of file content one zip may read, holes
	// included; 0 or less means DefaultMaxBytes. Files are taken in walk
	// order; one that does not fit in what is left is left out, and a
	// smaller one after it may still fit.
	MaxBytes int64
	// MaxHoleBytes is how many bytes of holes one zip may expand into
	// zeros, over all its files; 0 or less means DefaultMaxHoleBytes. A
	// file whose holes do not fit is left out as sparse.
	MaxHoleBytes int64
	// MaxEntries is how many entries (files, directories, symlinks) one
	// zip stores; 0 or less means DefaultMaxEntries. A directory is read
	// no further than the entries left; the rest of it is left out.
	MaxEntries int64
	// MaxNameBytes is how many bytes of entry names one zip stores; 0 or
	// less means DefaultMaxNameBytes. An entry whose name does not fit in
	// what is left is left out, with what is under it.
	MaxNameBytes int64
	// Skip, if set, is told of each entry that could not be read.
	Skip func(name string, err error)
	// Extra are files of agentbox's own the zip holds at its root.
	Extra []Extra
}

// WriteZip writes the tree under root to w as a zip with the default
// Options. Entries that cannot be read are reported to skip (may be nil)
// and left out; an error means the zip is incomplete and must not be taken
// for whole.
func WriteZip(w io.Writer, root *os.Root, skip func(name string, err error)) error {
	_, err := Options{Skip: skip}.Write(w, root)
	return err
}

// WriteZipFile zips the directory dir into the file path, atomically, with
// the default Options.
func WriteZipFile(path, dir string) error {
	_, err := Options{}.WriteFile(path, dir)
	return err
}

// Write writes the tree under root to w as a zip and reports what it left
// out or renamed. An error means the zip is incomplete and must not be
// taken for whole.
func (o Options) Write(w io.Writer, root *os.Root) (Report, error) {
	z := newZipper(o, root, w)
	err := z.writeExtras()
	if err == nil {
		err = z.dir(".", "")
	}
	if err == nil {
		err = z.finish()
	}
	return z.report, err
}

// WriteFile zips the directory dir into the file path, atomically: path
// appears only once the zip is whole.
func (o Options) WriteFile(path, dir string) (Report, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Report{}, err
	}
	defer root.Close()
	return CreateFile(path, func(w io.Writer) (Report, error) { return o.Write(w, root) })
}

// CreateFile has write make a zip in the file path, atomically: write
// writes into a temporary file beside path, which becomes path only once
// write returned no error.
func CreateFile(path string, write func(w io.Writer) (Report, error)) (Report, error) {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return Report{}, err
	}
	rep, err := write(f)
	err = errors.Join(err, f.Close())
	if err != nil {
		os.Remove(tmp)
		return rep, err
	}
	return rep, os.Rename(tmp, path)
}

// zipper is one zip being written.
type zipper struct {
	opts        Options
	root        *os.Root
	zw          *zip.Writer
	bytesLeft   int64 // of Options.MaxBytes
	holesLeft   int64 // of Options.MaxHoleBytes
	entriesLeft int64 // of Options.MaxEntries, taken as directories are read
	namesLeft   int64 // of Options.MaxNameBytes
	links       deferredLinks
	report      Report
	noExtra     map[string]bool // extras whose Open returned ErrNoExtra
}

func newZipper(o Options, root *os.Root, w io.Writer) *zipper {
	return &zipper{opts: o, root: root, zw: zip.NewWriter(w), bytesLeft: o.maxBytes(), holesLeft: o.maxHoleBytes(),
		entriesLeft: o.maxEntries(), namesLeft: o.maxNameBytes()}
}

// dir adds the entries of the workspace directory path, whose entry name
// in the zip is entry ("" for the root), and everything under them.
func (z *zipper) dir(path, entry string) error {
	ents, more, err := z.readDir(path)
	if err != nil {
		z.unreadable(path, err)
		if len(ents) == 0 {
			return nil
		}
	}
	if more {
		z.leftOut(path, fmt.Sprintf("some of what this directory holds: the zip stores at most %d entries", z.opts.maxEntries()))
	}
	names := make([]string, len(ents))
	for i, d := range ents {
		names[i] = d.Name()
	}
	var reserved []string
	if path == "." {
		reserved = z.reserved()
	}
	for i, name := range siblingNames(names, reserved) {
		if err := z.add(join(path, ents[i].Name()), join(entry, name), ents[i]); err != nil {
			return err
		}
	}
	return nil
}

// readDir reads the entries of the directory path, sorted by name, but no
// more than the zip has entries left for, which it takes: the entries of
// every directory open in the walk are held at once. more says the
// directory holds entries that were not read.
func (z *zipper) readDir(path string) (ents []fs.DirEntry, more bool, err error) {
	f, err := z.root.OpenFile(path, openFlags|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	// One more than is left tells whether the directory holds more.
	ents, err = f.ReadDir(int(min(z.entriesLeft+1, math.MaxInt32)))
	if err == io.EOF {
		err = nil
	}
	if int64(len(ents)) > z.entriesLeft {
		ents, more = ents[:z.entriesLeft], true
	}
	z.entriesLeft -= int64(len(ents))
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, more, err
}

// add adds one entry: a directory and what is under it, a regular file, or
// a symlink (kept for the end).
func (z *zipper) add(path, entry string, d fs.DirEntry) error {
	if len(entry) >= maxPathBytes {
		z.leftOut(path, fmt.Sprintf("path of %d bytes; extractors take at most %d", len(entry), maxPathBytes-1))
		return nil
	}
	if int64(len(entry)) > z.namesLeft {
		z.leftOut(path, fmt.Sprintf("the zip stores at most %d bytes of entry names", z.opts.maxNameBytes()))
		return nil
	}
	z.namesLeft -= int64(len(entry))
	switch t := d.Type(); {
	case t.IsDir():
		return z.addDir(path, entry)
	case t&fs.ModeSymlink != 0:
		z.addLink(path, entry)
		return nil
	case t.IsRegular():
		return z.addFile(path, entry)
	}
	z.leftOut(path, "not a regular file, directory or symlink ("+kind(d.Type())+")")
	return nil
}

func (z *zipper) addDir(path, entry string) error {
	if _, err := z.zw.CreateHeader(&zip.FileHeader{Name: entry + "/", Method: zip.Store}); err != nil {
		return err
	}
	z.stored(path, entry)
	return z.dir(path, entry)
}

// addFile adds a regular file, or leaves it out when it does not fit in
// what is left of the zip's budgets.
func (z *zipper) addFile(path, entry string) error {
	f, err := z.root.OpenFile(path, openFlags, 0)
	if err != nil {
		z.unreadable(path, err)
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		z.unreadable(path, err)
		return nil
	}
	if !info.Mode().IsRegular() { // replaced since the directory was read
		z.leftOut(path, "not a regular file, directory or symlink ("+kind(info.Mode())+")")
		return nil
	}
	if why := z.charge(f, info.Size()); why != "" {
		z.leftOut(path, why)
		return nil
	}
	return z.copyFile(f, info, path, entry)
}

// copyFile stores the first info.Size() bytes of f, no more, so a file that
// grows while it is read cannot overrun the budget it was charged.
func (z *zipper) copyFile(f *os.File, info fs.FileInfo, path, entry string) error {
	fh, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	fh.Name, fh.Method = entry, zip.Deflate
	if info.Size() == 0 {
		// Nothing to compress, and a deflater costs ~1 MB to set up: a
		// workspace of many empty files or links to one would pay it each.
		fh.Method = zip.Store
	}
	fh.SetMode(info.Mode().Perm()) // no setuid, setgid or sticky bits
	zf, err := z.zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	if _, err := io.Copy(zf, io.NewSectionReader(f, 0, info.Size())); err != nil {
		return err
	}
	z.stored(path, entry)
	return nil
}

// finish writes the symlinks, then the manifest if anything was left out
// or renamed, and closes the zip.
func (z *zipper) finish() error {
	if err := z.writeLinks(); err != nil {
		return err
	}
	if err := z.writeManifest(); err != nil {
		return err
	}
	return z.zw.Close()
}

// join joins a directory path (or entry name) and a name within it.
func join(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// kind names a file type for the manifest.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}

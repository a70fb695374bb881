package githost

import (
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// objects writes blobs into a git dir's object store as loose objects,
// from files Go opened itself: git is never given a workspace path to
// read.
type objects struct {
	dir     string // <git dir>/objects
	newHash func() hash.Hash
	known   map[string]bool // objects known to be in the store
}

// newObjects returns the object store of gitDir, whose object format is
// format ("sha1" or "sha256"); known holds objects already there (those
// of the base tree, which may be packed).
func newObjects(gitDir, format string, known map[string]bool) (*objects, error) {
	o := &objects{dir: filepath.Join(gitDir, "objects"), known: known}
	switch format {
	case "sha1":
		o.newHash = sha1.New
	case "sha256":
		o.newHash = sha256.New
	default:
		return nil, fmt.Errorf("git dir %s: object format %q", gitDir, format)
	}
	return o, nil
}

// blobFile stores the first size bytes of f as a blob and returns its id.
// A file that ends before size (it changed while read) is an error.
func (o *objects) blobFile(f *os.File, size int64) (string, error) {
	h := o.newHash()
	if err := copyBlob(h, f, size); err != nil {
		return "", err
	}
	id := hex.EncodeToString(h.Sum(nil))
	if o.has(id) {
		return id, nil
	}
	return id, o.write(id, func(w io.Writer) error { return copyBlob(w, f, size) })
}

// blobBytes stores b as a blob and returns its id.
func (o *objects) blobBytes(b []byte) (string, error) {
	h := o.newHash()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	id := hex.EncodeToString(h.Sum(nil))
	if o.has(id) {
		return id, nil
	}
	return id, o.write(id, func(w io.Writer) error {
		fmt.Fprintf(w, "blob %d\x00", len(b))
		_, err := w.Write(b)
		return err
	})
}

// copyBlob writes the blob header and the first size bytes of f to w.
func copyBlob(w io.Writer, f *os.File, size int64) error {
	if _, err := io.WriteString(w, "blob "+strconv.FormatInt(size, 10)+"\x00"); err != nil {
		return err
	}
	n, err := io.Copy(w, io.NewSectionReader(f, 0, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, not %d: it changed while read", f.Name(), n, size)
	}
	return err
}

func (o *objects) path(id string) string { return filepath.Join(o.dir, id[:2], id[2:]) }

func (o *objects) has(id string) bool {
	if o.known[id] {
		return true
	}
	if _, err := os.Stat(o.path(id)); err == nil {
		o.known[id] = true
		return true
	}
	return false
}

// write stores object id, whose uncompressed bytes body writes, as a
// loose object: compressed into a temporary file renamed into place, so
// the store never holds half an object.
func (o *objects) write(id string, body func(io.Writer) error) error {
	dir := filepath.Dir(o.path(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write object: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return fmt.Errorf("write object: %w", err)
	}
	defer os.Remove(tmp.Name())
	zw, _ := zlib.NewWriterLevel(tmp, zlib.BestSpeed)
	err = body(zw)
	err = errors.Join(err, zw.Close(), tmp.Chmod(0o444), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), o.path(id))
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write object %s: %w", id, err)
	}
	o.known[id] = true
	return nil
}

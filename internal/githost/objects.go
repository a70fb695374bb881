package githost

import (
	"bufio"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// objects writes blobs into a git dir's object store, from files Go
// opened itself: git is never given a workspace path to read. The blobs of
// one walk go into one pack, indexed by git (index-pack reads only that
// pack, which the host wrote): a loose object per file cost a file
// creation each, most of a 5,000-file snapshot's time.
type objects struct {
	dir     string // <git dir>/objects
	newHash func() hash.Hash
	known   map[string]bool // objects known to be in the store, or in the pack
	pack    *os.File        // the pack being written; nil until the first blob
	buf     *bufio.Writer
	zw      *zlib.Writer
	count   uint32
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
	io.WriteString(h, "blob "+strconv.FormatInt(size, 10)+"\x00")
	if err := copySize(h, f, size); err != nil {
		return "", err
	}
	id := hex.EncodeToString(h.Sum(nil))
	if o.has(id) {
		return id, nil
	}
	return id, o.write(id, size, func(w io.Writer) error { return copySize(w, f, size) })
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
	return id, o.write(id, int64(len(b)), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// copySize writes the first size bytes of f to w.
func copySize(w io.Writer, f *os.File, size int64) error {
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

// packHeader is a version 2 pack's header with its object count left 0;
// finish fills it in.
var packHeader = []byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0}

// write appends blob id, of size bytes that body writes, to the pack.
func (o *objects) write(id string, size int64, body func(io.Writer) error) error {
	if o.pack == nil {
		if err := o.startPack(); err != nil {
			return fmt.Errorf("write object: %w", err)
		}
	}
	// The entry's header: type 3 (blob) and the size, 4 bits then 7 a byte.
	c := byte(3<<4) | byte(size&15)
	for size >>= 4; size > 0; size >>= 7 {
		o.buf.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
	}
	o.buf.WriteByte(c)
	o.zw.Reset(o.buf)
	if err := errors.Join(body(o.zw), o.zw.Close()); err != nil {
		return fmt.Errorf("write object %s: %w", id, err)
	}
	o.count++
	o.known[id] = true
	return nil
}

func (o *objects) startPack() error {
	dir := filepath.Join(o.dir, "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp_agentbox_*.pack")
	if err != nil {
		return err
	}
	o.pack, o.buf = f, bufio.NewWriterSize(f, 256<<10)
	o.zw, _ = zlib.NewWriterLevel(o.buf, zlib.BestSpeed)
	_, err = o.buf.Write(packHeader)
	return err
}

// finish completes the pack (its count and checksum), has git index it,
// and puts both in the store; the blobs are readable by git after it.
func (o *objects) finish(ctx context.Context, h *Host, gitDir string) error {
	if o.pack == nil {
		return nil
	}
	tmp := o.pack.Name()
	defer os.Remove(tmp)
	sum, err := o.seal()
	if err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	// tmp is an absolute path the host made: no option to end.
	idx := strings.TrimSuffix(tmp, ".pack") + ".idx"
	defer os.Remove(idx)
	if _, err := h.git(ctx, run{args: []string{"index-pack", "-o", idx, tmp}, gitDir: gitDir}); err != nil {
		return err
	}
	name := filepath.Join(o.dir, "pack", "pack-"+sum)
	if err := os.Rename(tmp, name+".pack"); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	if err := os.Rename(idx, name+".idx"); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	return nil
}

// seal writes the pack's object count and its trailing checksum, and
// closes it.
func (o *objects) seal() (string, error) {
	f := o.pack
	o.pack = nil
	defer f.Close()
	if err := o.buf.Flush(); err != nil {
		return "", err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], o.count)
	if _, err := f.WriteAt(n[:], 8); err != nil {
		return "", err
	}
	h := o.newHash()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", err
	}
	sum := h.Sum(nil)
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return "", err
	}
	if _, err := f.Write(sum); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum), f.Close()
}

// abort removes a pack left unfinished.
func (o *objects) abort() {
	if o.pack != nil {
		o.pack.Close()
		os.Remove(o.pack.Name())
		o.pack = nil
	}
}

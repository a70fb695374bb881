package workspace_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/workspace"
)

// ent is one entry of an archive a test builds. kind: 'f' file, 'd'
// directory, 'l' symlink, 'h' hard link (tar only), 'c' character device,
// 'p' FIFO.
type ent struct {
	kind byte
	name string
	body string // a file's content
	link string // a link's target
	mode int64  // 0: 0644 for files, 0755 for directories
}

func file(name, body string) ent         { return ent{kind: 'f', name: name, body: body} }
func dir(name string) ent                { return ent{kind: 'd', name: name} }
func symlink(name, target string) ent    { return ent{kind: 'l', name: name, link: target} }
func hardLink(name, target string) ent   { return ent{kind: 'h', name: name, link: target} }
func withMode(e ent, mode int64) ent     { e.mode = mode; return e }
func zeros(name string, n int) ent       { return file(name, strings.Repeat("\x00", n)) }
func special(kind byte, name string) ent { return ent{kind: kind, name: name} }

var mtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func (e ent) perm() int64 {
	switch {
	case e.mode != 0:
		return e.mode
	case e.kind == 'd':
		return 0o755
	}
	return 0o644
}

func tarGz(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	types := map[byte]byte{'f': tar.TypeReg, 'd': tar.TypeDir, 'l': tar.TypeSymlink, 'h': tar.TypeLink, 'c': tar.TypeChar, 'p': tar.TypeFifo}
	for _, e := range ents {
		hdr := &tar.Header{Typeflag: types[e.kind], Name: e.name, Linkname: e.link, Mode: e.perm(), Size: int64(len(e.body)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zipOf(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		fh := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
		mode := fs.FileMode(e.perm())
		body := e.body
		switch e.kind {
		case 'd':
			mode |= fs.ModeDir
			if !strings.HasSuffix(fh.Name, "/") {
				fh.Name += "/"
			}
		case 'l':
			mode, body = fs.ModeSymlink|0o777, e.link
		case 'c':
			mode |= fs.ModeDevice | fs.ModeCharDevice
		case 'p':
			mode |= fs.ModeNamedPipe
		case 'h':
			t.Fatal("zip has no hard links")
		}
		fh.SetMode(mode)
		w, err := zw.CreateHeader(fh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// lyingZip is a zip of one file whose headers say it holds 10 bytes, and
// whose data inflates to n.
func lyingZip(t *testing.T, n int) []byte {
	t.Helper()
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	data := make([]byte, n)
	fw.Write(data)
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	fh := &zip.FileHeader{Name: "bomb", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(data[:10]),
		CompressedSize64: uint64(comp.Len()), UncompressedSize64: 10}
	w, err := zw.CreateRaw(fh)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unpack unpacks data into a new directory "ws" of a fresh parent, and
// returns the parent and the error.
func unpack(t *testing.T, data []byte, f workspace.Format, lim workspace.Limits) (string, error) {
	t.Helper()
	parent := t.TempDir()
	return parent, workspace.Unpack(t.Context(), filepath.Join(parent, "ws"), bytes.NewReader(data), f, lim)
}

// TestUnpackHostile: each hostile archive is refused with the right error,
// and nothing is left beside the workspace's place, nor in it.
func TestUnpackHostile(t *testing.T) {
	defer workspace.SetRatioFloor(1 << 20)()
	small := workspace.Limits{MaxEntries: 3, MaxBytes: 100}
	tests := []struct {
		name    string
		ents    []ent
		lim     workspace.Limits
		want    error
		tarOnly bool
	}{
		{name: "absolute path", ents: []ent{file("/etc/evil", "x")}, want: workspace.ErrBadArchive},
		{name: "dotdot escape", ents: []ent{file("a/../../evil", "x")}, want: workspace.ErrBadArchive},
		{name: "dotdot dir", ents: []ent{dir("../up")}, want: workspace.ErrBadArchive},
		{name: "symlink out then write through it", ents: []ent{symlink("a", "/etc"), file("a/passwd", "x")}, want: workspace.ErrBadArchive},
		{name: "relative symlink out", ents: []ent{dir("d"), symlink("d/up", "../../x")}, want: workspace.ErrBadArchive},
		{name: "write through a symlink inside", ents: []ent{dir("sub"), symlink("a", "sub"), file("a/x", "x")}, want: workspace.ErrBadArchive},
		{name: "hard link out absolute", ents: []ent{hardLink("x", "/etc/passwd")}, want: workspace.ErrBadArchive, tarOnly: true},
		{name: "hard link out dotdot", ents: []ent{hardLink("x", "../y")}, want: workspace.ErrBadArchive, tarOnly: true},
		{name: "hard link to a later entry", ents: []ent{hardLink("x", "y"), file("y", "y")}, want: workspace.ErrBadArchive, tarOnly: true},
		{name: "hard link to a symlink", ents: []ent{symlink("l", "y"), hardLink("x", "l")}, want: workspace.ErrBadArchive, tarOnly: true},
		{name: "device node", ents: []ent{file("ok", "x"), special('c', "null")}, want: workspace.ErrBadArchive},
		{name: "fifo", ents: []ent{file("ok", "x"), special('p', "pipe")}, want: workspace.ErrBadArchive},
		{name: "too many entries", ents: []ent{file("a", ""), file("b", ""), file("c", ""), file("d", "")}, lim: small, want: workspace.ErrTooLarge},
		{name: "too many bytes", ents: []ent{file("a", strings.Repeat("x", 60)), file("b", strings.Repeat("y", 60))}, lim: small, want: workspace.ErrTooLarge},
		{name: "bomb by ratio", ents: []ent{zeros("z", 4<<20)}, want: workspace.ErrBadArchive},
		{name: "duplicate names", ents: []ent{file("a", "1"), file("a", "2")}, want: workspace.ErrBadArchive},
		{name: "duplicate symlink", ents: []ent{file("a", "1"), symlink("a", "b")}, want: workspace.ErrBadArchive},
		{name: "directory then file", ents: []ent{dir("a"), file("a", "x")}, want: workspace.ErrBadArchive},
		{name: "file then directory", ents: []ent{file("a", "x"), dir("a")}, want: workspace.ErrBadArchive},
		{name: "file beneath a file", ents: []ent{file("a", "x"), file("a/b", "y")}, want: workspace.ErrBadArchive},
		{name: "file in the root's place", ents: []ent{file(".", "x")}, want: workspace.ErrBadArchive},
		{name: "backslash", ents: []ent{file(`..\..\evil`, "x")}, want: workspace.ErrBadArchive},
	}
	formats := []struct {
		f    workspace.Format
		make func(*testing.T, ...ent) []byte
	}{{workspace.FormatTarGz, tarGz}, {workspace.FormatZip, zipOf}}
	for _, tt := range tests {
		for _, f := range formats {
			if tt.tarOnly && f.f == workspace.FormatZip {
				continue
			}
			t.Run(string(f.f)+"/"+tt.name, func(t *testing.T) {
				parent, err := unpack(t, f.make(t, tt.ents...), f.f, tt.lim)
				if !errors.Is(err, tt.want) {
					t.Fatalf("Unpack = %v, want %v", err, tt.want)
				}
				assertEmpty(t, parent)
			})
		}
	}
}

// TestUnpackBadInput: not an archive, a lying zip header, a zip whose
// directory declares too much, an unknown format.
func TestUnpackBadInput(t *testing.T) {
	big := zipOf(t, zeros("a", 1<<20))
	for _, tt := range []struct {
		name string
		data []byte
		f    workspace.Format
		lim  workspace.Limits
		want error
	}{
		{"zip bomb with a lying header", lyingZip(t, 8<<20), workspace.FormatZip, workspace.Limits{}, workspace.ErrBadArchive},
		{"zip declaring too much", big, workspace.FormatZip, workspace.Limits{MaxBytes: 1000}, workspace.ErrTooLarge},
		{"zip larger than allowed", big, workspace.FormatZip, workspace.Limits{MaxBytes: 10, MaxEntries: 1}, workspace.ErrTooLarge},
		{"garbage as zip", []byte("not a zip at all"), workspace.FormatZip, workspace.Limits{}, workspace.ErrBadArchive},
		{"garbage as tar.gz", []byte("not gzip at all"), workspace.FormatTarGz, workspace.Limits{}, workspace.ErrBadArchive},
		{"zip as tar.gz", zipOf(t, file("a", "x")), workspace.FormatTarGz, workspace.Limits{}, workspace.ErrBadArchive},
		{"truncated tar.gz", tarGz(t, file("a", strings.Repeat("x", 5000)))[:40], workspace.FormatTarGz, workspace.Limits{}, workspace.ErrBadArchive},
		{"unknown format", tarGz(t, file("a", "x")), "rar", workspace.Limits{}, workspace.ErrBadArchive},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent, err := unpack(t, tt.data, tt.f, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Unpack = %v, want %v", err, tt.want)
			}
			t.Log(err)
			assertEmpty(t, parent)
		})
	}
}

// assertEmpty fails unless parent holds nothing: neither the workspace nor
// a temporary file or directory.
func assertEmpty(t *testing.T, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestUnpackGood: a good archive is unpacked exactly: nested and empty
// directories, links inside the tree, modes without set-uid bits, times.
func TestUnpackGood(t *testing.T) {
	ents := []ent{
		dir("./"),
		file("./top.txt", "top"),
		withMode(file("bin/run.sh", "#!/bin/sh\n"), 0o755),
		withMode(file("bin/suid", "s"), 0o4755),
		dir("d/e"),
		file("d/e/f.txt", "deep"),
		dir("empty"),
		withMode(dir("private"), 0o700),
		symlink("link", "d/e/f.txt"),
		symlink("d/up", "../top.txt"),
		symlink("d/e/loop", "./../e/.."),
	}
	want := map[string]string{
		"top.txt": "f 644 top", "bin": "d", "bin/run.sh": "f 755 #!/bin/sh\n", "bin/suid": "f 755 s",
		"d": "d", "d/e": "d", "d/e/f.txt": "f 644 deep", "empty": "d", "private": "d 700",
		"link": "l d/e/f.txt", "d/up": "l ../top.txt", "d/e/loop": "l ..",
	}
	for _, f := range []struct {
		f    workspace.Format
		data []byte
		want map[string]string
	}{
		{workspace.FormatZip, zipOf(t, ents...), want},
		{workspace.FormatTarGz, tarGz(t, append(ents, hardLink("same", "d/e/f.txt"))...), with(want, "same", "f 644 deep")},
	} {
		t.Run(string(f.f), func(t *testing.T) {
			parent, err := unpack(t, f.data, f.f, workspace.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(parent, "ws")
			got := tree(t, ws)
			for name, w := range f.want {
				if got[name] != w {
					t.Errorf("%s: %q, want %q", name, got[name], w)
				}
			}
			for name, g := range got {
				if _, ok := f.want[name]; !ok {
					t.Errorf("unexpected %s: %q", name, g)
				}
			}
			if fi, err := os.Stat(filepath.Join(ws, "d/e/f.txt")); err != nil || !fi.ModTime().Equal(mtime) {
				t.Errorf("f.txt modified %v (%v), want %v", fi.ModTime(), err, mtime)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Errorf("beside the workspace: %v", ents)
			}
			if f.f == workspace.FormatTarGz {
				a, _ := os.Stat(filepath.Join(ws, "same"))
				b, _ := os.Stat(filepath.Join(ws, "d/e/f.txt"))
				if !os.SameFile(a, b) {
					t.Error("the hard link is a copy")
				}
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	c := map[string]string{k: v}
	for k, v := range m {
		c[k] = v
	}
	return c
}

// tree describes every entry under dir: "f <perm> <content>", "d" (or "d
// <perm>" when not 0755), "l <target>".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	return walkTree(t, dir, func(p string, fi fs.FileInfo) string {
		switch {
		case fi.IsDir() && fi.Mode().Perm() == 0o755:
			return "d"
		case fi.IsDir():
			return "d " + octal(fi.Mode())
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			return "l " + target
		}
		b, _ := os.ReadFile(p)
		desc := "f " + octal(fi.Mode()) + " " + string(b)
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			desc += " (special bits)"
		}
		return desc
	})
}

func octal(m fs.FileMode) string { return fmt.Sprintf("%o", m.Perm()) }

// TestUnpackExists: a workspace that is there is left as it is.
func TestUnpackExists(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	err := workspace.Unpack(t.Context(), ws, bytes.NewReader(tarGz(t, file("a", "x"))), workspace.FormatTarGz, workspace.Limits{})
	if !errors.Is(err, workspace.ErrExists) {
		t.Fatalf("Unpack = %v, want ErrExists", err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("wrote into the existing workspace: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Dir(ws)); len(ents) != 1 {
		t.Errorf("left beside it: %v", ents)
	}
}

// TestUnpackCanceled: a canceled unpack leaves nothing behind.
func TestUnpackCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parent := t.TempDir()
	err := workspace.Unpack(ctx, filepath.Join(parent, "ws"), bytes.NewReader(tarGz(t, file("a", "x"))), workspace.FormatTarGz, workspace.Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Unpack = %v, want context.Canceled", err)
	}
	assertEmpty(t, parent)
}

// TestUnpackDeep: the directories made for a deep entry count as entries,
// so a few entries cannot make a great many directories.
func TestUnpackDeep(t *testing.T) {
	deep := strings.Repeat("a/", 50) + "f"
	parent, err := unpack(t, tarGz(t, file(deep, "x")), workspace.FormatTarGz, workspace.Limits{MaxEntries: 20})
	if !errors.Is(err, workspace.ErrTooLarge) {
		t.Fatalf("Unpack = %v, want ErrTooLarge", err)
	}
	assertEmpty(t, parent)
	parent, err = unpack(t, tarGz(t, file(deep, "x"), file(strings.Repeat("a/", 49)+"g", "y")), workspace.FormatTarGz, workspace.Limits{MaxEntries: 52})
	if err != nil {
		t.Fatalf("Unpack of 2 entries beneath 50 directories: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(parent, "ws", deep)); string(b) != "x" || err != nil {
		t.Errorf("%s = %q, %v", deep, b, err)
	}
}

// TestUnpackMany: many small files (written by several writers at once)
// and large ones come out whole; a bad entry after them still leaves
// nothing behind.
func TestUnpackMany(t *testing.T) {
	var ents []ent
	for i := range 500 {
		ents = append(ents, file(fmt.Sprintf("d%02d/f%03d", i%25, i), strings.Repeat(fmt.Sprint(i), i%50)))
	}
	ents = append(ents, file("big/a", strings.Repeat("a", 3<<20)), file("big/b", strings.Repeat("b", 1<<20+1)), hardLink("same", "d00/f025"))
	parent, err := unpack(t, tarGz(t, ents...), workspace.FormatTarGz, workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(ents[:len(ents)-1:len(ents)-1], file("same", strings.Repeat("25", 25))) {
		if b, err := os.ReadFile(filepath.Join(parent, "ws", e.name)); string(b) != e.body || err != nil {
			t.Fatalf("%s: %d bytes, %v; want %d", e.name, len(b), err, len(e.body))
		}
	}
	parent, err = unpack(t, tarGz(t, append(ents, file("../evil", "x"))...), workspace.FormatTarGz, workspace.Limits{})
	if !errors.Is(err, workspace.ErrBadArchive) {
		t.Fatalf("Unpack = %v, want ErrBadArchive", err)
	}
	assertEmpty(t, parent)
}

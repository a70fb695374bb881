package daemon_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
)

var bg = context.Background()

func TestWriteReadStat(t *testing.T) {
	c, ws := start(t)
	fi, err := c.WriteFile(bg, "a/b/c.txt", []byte("line1\nline2\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Path != "a/b/c.txt" || fi.Type != "file" || fi.Size != 12 || fi.Mode != 0o600 {
		t.Errorf("info %+v", fi)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a/b/c.txt")); string(b) != "line1\nline2\n" {
		t.Errorf("on disk %q", b)
	}
	got, err := c.ReadFile(bg, "/"+strings.TrimPrefix(filepath.Join(ws, "a/b/c.txt"), "/")) // absolute inside the workspace
	if err != nil || string(got) != "line1\nline2\n" {
		t.Errorf("read %q, %v", got, err)
	}
	part, err := c.ReadRange(bg, "a/b/c.txt", 6, 5)
	if err != nil || string(part) != "line2" {
		t.Errorf("range %q, %v", part, err)
	}
	if _, err := c.ReadFile(bg, "a/b"); !errors.Is(err, guest.ErrIsDir) {
		t.Errorf("read dir: %v", err)
	}
	if _, err := c.ReadFile(bg, "missing"); !errors.Is(err, guest.ErrNotFound) {
		t.Errorf("read missing: %v", err)
	}
	st, err := c.Stat(bg, "a")
	if err != nil || st.Type != "dir" {
		t.Errorf("stat %+v %v", st, err)
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "a/b"))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestWriteLimit(t *testing.T) {
	c, ws := start(t, func(cfg *daemon.Config) { cfg.MaxWriteBytes = 1000 })
	if _, err := c.WriteFile(bg, "big", make([]byte, 5000), 0); !errors.Is(err, guest.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

func TestListDeleteMove(t *testing.T) {
	c, ws := start(t)
	for _, p := range []string{"x/1.txt", "x/y/2.txt", "top.txt"} {
		if _, err := c.WriteFile(bg, p, []byte(p), 0); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("top.txt", filepath.Join(ws, "link"))
	l, err := c.List(bg, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range l.Entries {
		got[e.Path] = e.Type
	}
	want := map[string]string{"x": "dir", "x/1.txt": "file", "x/y": "dir", "x/y/2.txt": "file", "top.txt": "file", "link": "symlink"}
	if len(got) != len(want) {
		t.Errorf("list = %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if l, _ := c.List(bg, "x", false, 0); len(l.Entries) != 2 {
		t.Errorf("non-recursive: %+v", l.Entries)
	}
	if l, _ := c.List(bg, "", true, 2); len(l.Entries) != 2 || !l.Truncated {
		t.Errorf("max 2: %d entries, truncated %v", len(l.Entries), l.Truncated)
	}
	if _, err := c.Move(bg, guest.MoveRequest{From: "top.txt", To: "x/1.txt"}); !errors.Is(err, guest.ErrExists) {
		t.Errorf("move onto existing: %v", err)
	}
	if _, err := c.Move(bg, guest.MoveRequest{From: "top.txt", To: "new/dir/top.txt"}); err != nil {
		t.Errorf("move: %v", err)
	}
	if err := c.Delete(bg, "x", false); !errors.Is(err, guest.ErrExists) {
		t.Errorf("delete non-empty dir: %v", err)
	}
	if err := c.Delete(bg, "x", true); err != nil {
		t.Errorf("delete recursive: %v", err)
	}
	if err := c.Delete(bg, "", true); !errors.Is(err, guest.ErrBadRequest) {
		t.Errorf("delete workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); !os.IsNotExist(err) {
		t.Errorf("x still there: %v", err)
	}
}

func TestSearch(t *testing.T) {
	c, _ := start(t)
	c.WriteFile(bg, "src/app.py", []byte("import os\ndef health():\n    return {'status': 'ok'}\n"), 0)
	c.WriteFile(bg, "src/notes.md", []byte("health check TODO\n"), 0)
	c.WriteFile(bg, "bin.dat", []byte("health\x00\x01"), 0)
	res, err := c.Search(bg, guest.SearchRequest{Pattern: `HEALTH\(`, IgnoreCase: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 1 || res.Matches[0] != (guest.Match{Path: "src/app.py", Line: 2, Text: "def health():"}) {
		t.Errorf("matches %+v", res.Matches)
	}
	res, _ = c.Search(bg, guest.SearchRequest{Pattern: "health", Glob: "*.md"})
	if len(res.Matches) != 1 || res.Matches[0].Path != "src/notes.md" {
		t.Errorf("glob matches %+v", res.Matches)
	}
	res, _ = c.Search(bg, guest.SearchRequest{Pattern: "health"})
	if len(res.Matches) != 2 || res.Skipped != 1 {
		t.Errorf("binary file should be skipped: %+v", res)
	}
	if _, err := c.Search(bg, guest.SearchRequest{Pattern: "("}); !errors.Is(err, guest.ErrBadRequest) {
		t.Errorf("bad regexp: %v", err)
	}
}

func TestArchive(t *testing.T) {
	c, ws := start(t)
	c.WriteFile(bg, "proj/main.py", []byte("print('hi')\n"), 0)
	c.WriteFile(bg, "proj/pkg/util.py", []byte("X = 1\n"), 0)
	os.Symlink("/etc/passwd", filepath.Join(ws, "proj/evil"))
	want := []string{"evil", "main.py", "pkg/", "pkg/util.py"}

	rc, err := c.Archive(bg, "proj", "zip")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Name == "main.py" {
			r, _ := f.Open()
			b, _ := io.ReadAll(r)
			if string(b) != "print('hi')\n" {
				t.Errorf("main.py = %q", b)
			}
		}
		if f.Name == "evil" && f.Mode()&os.ModeSymlink == 0 {
			t.Errorf("symlink archived as %v: its target was followed", f.Mode())
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("zip names %v, want %v", names, want)
	}

	rc, err = c.Archive(bg, "proj", "tar")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	names = nil
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "evil" && (h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/passwd") {
			t.Errorf("tar symlink header %+v", h)
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("tar names %v, want %v", names, want)
	}
	if _, err := c.Archive(bg, "proj", "rar"); !errors.Is(err, guest.ErrBadRequest) {
		t.Errorf("bad format: %v", err)
	}
}

func TestPathsConfinedToWorkspace(t *testing.T) {
	c, ws := start(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "secret-link"))
	os.Symlink("../../../../../../../../etc", filepath.Join(ws, "rel-out"))
	os.Mkdir(filepath.Join(ws, "d"), 0o755)

	escapes := []string{"..", "../x", "d/../../x", "/etc/passwd", outside + "/secret", "out/secret", "secret-link", "rel-out/passwd", "out"}
	for _, p := range []string{"secret-link", "rel-out/passwd"} {
		if _, err := c.WriteFile(bg, p, []byte("x"), 0); !errors.Is(err, guest.ErrPathEscape) {
			t.Errorf("write through %q: %v, want ErrPathEscape", p, err)
		}
	}
	for _, p := range escapes {
		t.Run(p, func(t *testing.T) {
			checks := map[string]error{}
			_, checks["read"] = c.ReadFile(bg, p)
			_, checks["write"] = c.WriteFile(bg, p+"/new", []byte("x"), 0)
			_, checks["list"] = c.List(bg, p, true, 0)
			_, checks["search"] = c.Search(bg, guest.SearchRequest{Pattern: "s3cret", Path: p})
			_, checks["move"] = c.Move(bg, guest.MoveRequest{From: "d", To: p + "/d"})
			_, checks["archive"] = c.Archive(bg, p, "zip")
			for op, err := range checks {
				if !errors.Is(err, guest.ErrPathEscape) {
					t.Errorf("%s %q: err = %v, want ErrPathEscape", op, p, err)
				} else if !strings.Contains(err.Error(), "outside the workspace") {
					t.Errorf("%s %q: unclear message %q", op, p, err)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a write escaped the workspace")
	}
	// A symlink inside the workspace is written through.
	os.Symlink("real.txt", filepath.Join(ws, "inner-link"))
	if _, err := c.WriteFile(bg, "inner-link", []byte("via link"), 0); err != nil {
		t.Errorf("write through inner link: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "real.txt")); string(b) != "via link" {
		t.Errorf("link target holds %q", b)
	}
	// Deleting a symlink that points out removes the link, not its target.
	if err := c.Delete(bg, "secret-link", false); err != nil {
		t.Errorf("delete link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the link's target was removed: %v", err)
	}
}

func TestSpecialFilesDoNotHang(t *testing.T) {
	c, ws := start(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if _, err := c.ReadFile(ctx, "pipe"); !errors.Is(err, guest.ErrBadRequest) {
		t.Errorf("read fifo: %v, want ErrBadRequest", err)
	}
	os.Symlink("pipe", filepath.Join(ws, "pipe-link"))
	if _, err := c.WriteFile(ctx, "pipe-link", []byte("x"), 0); err == nil {
		t.Errorf("write through a link to a fifo succeeded")
	}
	c.WriteFile(ctx, "a.txt", []byte("needle\n"), 0)
	res, err := c.Search(ctx, guest.SearchRequest{Pattern: "needle"})
	if err != nil || len(res.Matches) != 1 {
		t.Errorf("search past a fifo: %+v %v", res, err)
	}
	rc, err := c.Archive(ctx, "", "tar")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); err != nil {
		t.Errorf("archive past a fifo: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("a call hung on the fifo")
	}
}

func TestConcurrentWritesToOneFile(t *testing.T) {
	c, ws := start(t)
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			_, err := c.WriteFile(bg, "same.txt", bytes.Repeat([]byte{byte('a' + i)}, 100_000), 0)
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Errorf("write: %v", err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(ws, "same.txt"))
	if len(b) != 100_000 || bytes.Count(b, b[:1]) != len(b) {
		t.Errorf("file mixes writers: %d bytes", len(b))
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 1 {
		t.Errorf("temporary files left: %d entries", len(entries))
	}
}

package artifact_test

import (
	"archive/zip"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
)

func TestWriteZipFile(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.WriteFile(filepath.Join(ws, "src/app.py"), []byte("print(1)\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(ws, "passwd"))
	syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644)
	out := filepath.Join(t.TempDir(), "a.zip")
	if err := artifact.WriteZipFile(out, ws); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		if f.Name == "passwd" && (f.Mode()&os.ModeSymlink == 0 || string(b) != "/etc/passwd") {
			t.Errorf("symlink stored as %v %q: followed instead of kept as a link", f.Mode(), b)
		}
		if f.Name == "src/app.py" && string(b) != "print(1)\n" {
			t.Errorf("app.py = %q", b)
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "passwd,src/,src/app.py" {
		t.Errorf("entries %s (the fifo must be left out)", got)
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial file left: %v", err)
	}
}

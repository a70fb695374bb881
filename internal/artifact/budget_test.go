package artifact_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
)

// Names cost the zip and its maker's memory whatever the files hold: an
// empty file, or one of 65,000 hard links to it, is an entry. Entries and
// their names have budgets of their own.
func TestEntryBudget(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("many/%02d", i)] = ""
	}
	files["z/deep/file"] = "x"
	write(t, ws, files)
	z, rep := zipOf(t, ws, artifact.Options{MaxEntries: 12})
	if n := len(z.entries) - 1; n > 12 { // less the manifest
		t.Errorf("%d entries stored, over a budget of 12: %v", n, z.order)
	}
	if !strings.Contains(z.manifest, "the zip stores at most 12 entries") || rep.Len() == 0 {
		t.Errorf("manifest does not say entries were left out:\n%s", z.manifest)
	}
}

func TestNameBudget(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("%03d", i)+strings.Repeat("n", 197)] = ""
	}
	write(t, ws, files)
	z, _ := zipOf(t, ws, artifact.Options{MaxNameBytes: 2000})
	names := 0
	for _, name := range z.order {
		if name != artifact.ManifestName {
			names += len(name)
		}
	}
	if names > 2000 || len(z.order) < 2 {
		t.Errorf("%d bytes of names stored (%d entries), want some, at most 2000", names, len(z.order))
	}
	if !strings.Contains(z.manifest, "bytes of entry names") {
		t.Errorf("manifest does not say names were left out:\n%s", z.manifest)
	}
}

// With the default options, a workspace of more hard links to a few empty
// files than the default budget (about 10 MB of a disk quota) must not
// make a zip of as many entries.
func TestDefaultEntryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: makes half a million links")
	}
	ws := t.TempDir()
	n := artifact.DefaultMaxEntries + 50_000
	for d := 0; d*60_000 < n; d++ {
		dir := filepath.Join(ws, strconv.Itoa(d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "f") // ext4 takes at most 65,000 links to a file
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 60_000 && d*60_000+i < n; i++ {
			if err := os.Link(f, filepath.Join(dir, strconv.Itoa(i))); err != nil {
				t.Skipf("cannot make %d hard links here: %v", n, err)
			}
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var out countingWriter
	rep, err := artifact.Options{}.Write(&out, root)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Len() == 0 {
		t.Errorf("%d links zipped, nothing left out; zip of %d bytes", n, out.n)
	}
	if out.n > 200<<20 {
		t.Errorf("a zip of %d bytes for a workspace of empty files", out.n)
	}
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

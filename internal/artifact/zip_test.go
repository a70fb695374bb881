package artifact_test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/artifact"
)

// entry is one decoded zip entry.
type entry struct {
	mode os.FileMode
	body string
}

// zipped is a decoded zip: its entries by name, in order, and the manifest.
type zipped struct {
	order    []string
	entries  map[string]entry
	manifest string
}

// zipOf zips the workspace ws with o and decodes the result.
func zipOf(t *testing.T, ws string, o artifact.Options) (zipped, artifact.Report) {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	rep, err := o.Write(&buf, root)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, buf.Bytes()), rep
}

func decode(t *testing.T, b []byte) zipped {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	z := zipped{entries: map[string]entry{}}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if _, dup := z.entries[f.Name]; dup {
			t.Errorf("entry %q twice", f.Name)
		}
		z.order = append(z.order, f.Name)
		z.entries[f.Name] = entry{mode: f.Mode(), body: string(body)}
		if f.Name == artifact.ManifestName {
			z.manifest = string(body)
		}
	}
	return z
}

// write makes the files of ws: name to content; a name ending in "/" is a
// directory, a content starting with "->" a symlink.
func write(t *testing.T, ws string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(content[2:], p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteZipFile(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"src/app.py": "print(1)\n", "passwd": "->/etc/passwd", "app": "->src/app.py"})
	syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644)
	out := filepath.Join(t.TempDir(), "a.zip")
	if err := artifact.WriteZipFile(out, ws); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	z := decode(t, b)
	if got := strings.Join(z.order, ","); got != "src/,src/app.py,app,"+artifact.ManifestName {
		t.Errorf("entries %s, want the file, then the link, then the manifest (fifo and outside link left out)", got)
	}
	if e := z.entries["app"]; e.mode&os.ModeSymlink == 0 || e.body != "src/app.py" {
		t.Errorf("link inside stored as %v %q: must stay a link", e.mode, e.body)
	}
	if e := z.entries["src/app.py"]; e.body != "print(1)\n" {
		t.Errorf("app.py = %q", e.body)
	}
	for _, want := range []string{`left out "passwd": symlink to "/etc/passwd", outside the workspace`, `left out "pipe": not a regular file, directory or symlink (named pipe)`} {
		if !strings.Contains(z.manifest, want) {
			t.Errorf("manifest lacks %q:\n%s", want, z.manifest)
		}
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial file left: %v", err)
	}
}

func TestCleanWorkspaceHasNoManifest(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"a/b.txt": "b", "a/link": "->b.txt", "up/down": "->../a/b.txt", "c.txt": "c"})
	z, rep := zipOf(t, ws, artifact.Options{})
	if rep.Len() != 0 || z.manifest != "" || len(z.entries) != 6 {
		t.Errorf("entries %v, notes %v: want all six, no manifest", z.order, rep.Notes)
	}
	if e := z.entries["up/down"]; e.mode&os.ModeSymlink == 0 || e.body != "../a/b.txt" {
		t.Errorf("up/down = %v %q", e.mode, e.body)
	}
}

// sparse makes a file of size bytes with no data: a hole throughout.
func sparse(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
}

func TestSparseFilesAreLeftOutQuickly(t *testing.T) {
	ws := t.TempDir()
	sparse(t, filepath.Join(ws, "big"), 20<<30)
	sparse(t, filepath.Join(ws, "medium"), 1<<30) // within the 2 GiB budget: left out for its holes alone
	// A small hole is expanded: the file is stored whole.
	holed, err := os.Create(filepath.Join(ws, "holed"))
	if err != nil {
		t.Fatal(err)
	}
	holed.WriteAt([]byte("end"), 1<<20)
	holed.Close()
	write(t, ws, map[string]string{"ok.txt": "ok"})

	start := time.Now()
	z, _ := zipOf(t, ws, artifact.Options{})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("zip took %v: sparse files were read", d)
	}
	for _, name := range []string{"big", "medium"} {
		if _, ok := z.entries[name]; ok {
			t.Errorf("%s is in the zip", name)
		}
		if !strings.Contains(z.manifest, `left out "`+name+`": sparse file of`) {
			t.Errorf("manifest does not name %s as sparse:\n%s", name, z.manifest)
		}
	}
	if e := z.entries["holed"]; len(e.body) != 1<<20+3 || !strings.HasSuffix(e.body, "end") || strings.Trim(e.body[:1<<20], "\x00") != "" {
		t.Errorf("holed: %d bytes, want its 1 MiB hole as zeros then \"end\"", len(e.body))
	}
	if z.entries["ok.txt"].body != "ok" {
		t.Errorf("ok.txt missing: %v", z.order)
	}
}

func TestHoleBudgetIsPerZip(t *testing.T) {
	ws := t.TempDir()
	for _, name := range []string{"h1", "h2", "h3"} {
		f, err := os.Create(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("x"), 1<<20) // a 1 MiB hole, then data
		f.Close()
	}
	z, rep := zipOf(t, ws, artifact.Options{MaxHoleBytes: 2<<20 + 1<<19})
	_, ok1 := z.entries["h1"]
	_, ok2 := z.entries["h2"]
	_, ok3 := z.entries["h3"]
	if !ok1 || !ok2 || ok3 || rep.Len() != 1 || !strings.Contains(rep.Notes[0].Why, "sparse") {
		t.Errorf("entries %v, notes %v: want h1 and h2 in, h3 left out once 2.5 MiB of holes are spent", z.order, rep.Notes)
	}
}

func TestByteBudget(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"a": strings.Repeat("a", 60), "b": strings.Repeat("b", 60), "c": strings.Repeat("c", 30)})
	z, rep := zipOf(t, ws, artifact.Options{MaxBytes: 100})
	if z.entries["a"].body != strings.Repeat("a", 60) || z.entries["c"].body != strings.Repeat("c", 30) {
		t.Errorf("entries %v: want a whole, and c, which still fits after b", z.order)
	}
	if _, ok := z.entries["b"]; ok {
		t.Errorf("b is in the zip, past the budget")
	}
	want := `left out "b": file of 60B, over the zip's budget of 100B of file content (40B was left)`
	if !strings.Contains(z.manifest, want) || rep.Len() != 1 {
		t.Errorf("manifest lacks %q:\n%s", want, z.manifest)
	}
}

// checkSafe fails the test for an entry name an extractor could misuse.
func checkSafe(t *testing.T, name string) {
	t.Helper()
	if !utf8.ValidString(name) || strings.HasPrefix(name, "/") {
		t.Errorf("entry %q: invalid UTF-8 or absolute", name)
	}
	for _, c := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		bad := c == "" || c == "." || c == ".." || strings.ContainsAny(c, `\<>:"|?*`) ||
			strings.HasSuffix(c, ".") || strings.HasSuffix(c, " ") || strings.IndexFunc(c, unicode.IsControl) >= 0
		stem := strings.ToUpper(strings.TrimRight(strings.SplitN(c, ".", 2)[0], " "))
		for _, dev := range []string{"CON", "PRN", "AUX", "NUL", "COM1", "COM9", "LPT1", "LPT9", "COM¹"} {
			bad = bad || stem == dev
		}
		if bad {
			t.Errorf("entry %q: component %q is unsafe", name, c)
		}
	}
}

func TestUnsafeNamesAreRenamed(t *testing.T) {
	tests := map[string]string{ // workspace name: entry name
		`back\slash`:      "back_slash",
		"ctl\x01\x1f":     "ctl__",
		"del\x7f":         "del_",
		"c1\u0085":        "c1_",
		`win<>:"|?*`:      "win_______",
		"CON":             "_CON",
		"nul.txt":         "_nul.txt",
		"Com1.log":        "_Com1.log",
		"lpt9":            "_lpt9",
		"COM¹":            "_COM¹",
		"aux .c":          "_aux .c",
		"dot.":            "dot_",
		"space ":          "space_",
		"...":             "___",
		"bad\xffutf8":     "bad_utf8",
		"dir\\x/file.txt": "dir_x/file.txt",
		"fine-ünïcode":    "fine-ünïcode",
		"console":         "console",
	}
	ws := t.TempDir()
	files := map[string]string{}
	for name := range tests {
		files[name] = "content of " + name
	}
	write(t, ws, files)
	z, _ := zipOf(t, ws, artifact.Options{})
	for _, name := range z.order {
		checkSafe(t, name)
	}
	for name, want := range tests {
		if got := z.entries[want]; got.body != "content of "+name {
			t.Errorf("%q: entry %q holds %q; entries %q", name, want, got.body, z.order)
		}
		top, _, _ := strings.Cut(want, "/")
		if want != name && !strings.Contains(z.manifest, " as "+strconv.Quote(top)+": not a safe name") {
			t.Errorf("manifest does not say %q became %q:\n%s", name, want, z.manifest)
		}
	}
	if strings.Contains(z.manifest, "file.txt") {
		t.Errorf("the manifest lists a file under a renamed directory, not just the directory:\n%s", z.manifest)
	}
}

func TestCollidingNamesStayApart(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{
		"a_b": "safe", `a\b`: "backslash", "a?b": "question",
		"README": "upper", "readme": "lower",
		"Dir/x": "in Dir", "dir": "file dir",
		"notes_.txt": "underscore", "notes:.txt": "colon", "notes__2.txt": "taken",
		"agentbox-omitted.txt": "the workspace's own",
	})
	z, rep := zipOf(t, ws, artifact.Options{})
	want := map[string]string{
		"a_b": "safe", "a_b_2": "question", "a_b_3": "backslash",
		"README": "upper", "readme_2": "lower",
		"Dir/x": "in Dir", "dir_2": "file dir",
		"notes_.txt": "underscore", "notes__3.txt": "colon", "notes__2.txt": "taken",
		"agentbox-omitted_2.txt": "the workspace's own",
	}
	for name, body := range want {
		if got, ok := z.entries[name]; !ok || got.body != body {
			t.Errorf("entry %q = %q, %v, want %q; entries %q", name, got.body, ok, body, z.order)
		}
	}
	folded := map[string]string{}
	for _, name := range z.order {
		if prev, dup := folded[strings.ToLower(name)]; dup {
			t.Errorf("entries %q and %q are the same ignoring case", prev, name)
		}
		folded[strings.ToLower(name)] = name
	}
	if rep.Len() != 6 || !strings.HasPrefix(z.manifest, "agentbox left") {
		t.Errorf("%d notes, want 6; manifest:\n%s", rep.Len(), z.manifest)
	}
}

func TestSymlinks(t *testing.T) {
	ws := t.TempDir()
	long := strings.Repeat("d/", 600) + "f"
	write(t, ws, map[string]string{
		"sub/file": "f", "top": "t",
		"abs":          "->/etc/passwd",
		"up":           "->../outside",
		"sub/upup":     "->../../outside",
		"sub/via":      "->deeper/../../../outside",
		"sub/win":      `->..\..\outside`,
		"sub/drive":    "->C:outside",
		"sub/long":     "->" + long,
		"in":           "->sub/file",
		"sub/sibling":  "->../top",
		"sub/dot":      "->./file",
		"sub/cleaned":  "->x/../file",
		"sub/self":     "->.",
		"sub/Bad\\Nam": "->file",
	})
	z, rep := zipOf(t, ws, artifact.Options{})
	stored := map[string]string{"in": "sub/file", "sub/sibling": "../top", "sub/dot": "file", "sub/cleaned": "file", "sub/self": ".", "sub/Bad_Nam": "file"}
	for name, target := range stored {
		if e := z.entries[name]; e.mode&os.ModeSymlink == 0 || e.body != target {
			t.Errorf("%s = %v %q, want a link to %q", name, e.mode, e.body, target)
		}
	}
	for _, name := range []string{"abs", "up", "sub/upup", "sub/via", "sub/win", "sub/drive", "sub/long"} {
		if _, ok := z.entries[name]; ok {
			t.Errorf("%s is in the zip", name)
		}
		if !strings.Contains(z.manifest, `left out "`+name+`": symlink`) {
			t.Errorf("manifest does not say why %s is left out:\n%s", name, z.manifest)
		}
	}
	seenLink := false
	for _, name := range z.order {
		isLink := z.entries[name].mode&os.ModeSymlink != 0
		if seenLink && !isLink && name != artifact.ManifestName {
			t.Errorf("%s comes after a link: links must come last", name)
		}
		seenLink = seenLink || isLink
	}
	if rep.Len() != 7+3 { // 7 left out, 2 targets cleaned, 1 renamed
		t.Errorf("%d notes:\n%s", rep.Len(), z.manifest)
	}
}

func TestUnreadableFileIsListed(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	ws := t.TempDir()
	write(t, ws, map[string]string{"secret": "s", "ok": "ok"})
	os.Chmod(filepath.Join(ws, "secret"), 0)
	var skipped []string
	z, _ := zipOf(t, ws, artifact.Options{Skip: func(name string, err error) { skipped = append(skipped, name) }})
	if len(skipped) != 1 || skipped[0] != "secret" || !strings.Contains(z.manifest, `left out "secret": unreadable`) {
		t.Errorf("skipped %v; manifest:\n%s", skipped, z.manifest)
	}
}

func TestOverlongPathsAreLeftOut(t *testing.T) {
	ws := t.TempDir()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	p := ""
	for len(p) < 4200 {
		p += strings.Repeat("d", 200) + "/"
		if err := root.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := root.WriteFile(p+"deep", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	z, rep := zipOf(t, ws, artifact.Options{})
	for _, name := range z.order {
		if len(name) >= 4096 {
			t.Errorf("entry of %d bytes", len(name))
		}
	}
	if rep.Len() != 1 || !strings.Contains(rep.Notes[0].Why, "path of 4") {
		t.Errorf("notes %v, want one for the first overlong directory", rep.Notes)
	}
}

package ui

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// fragmentHTML renders a job page fragment as the routes do.
func fragmentHTML(t *testing.T, name string, data any) string {
	t.Helper()
	u := New(Config{}, nil, nil)
	w := httptest.NewRecorder()
	if err := u.fragment(w, "job", name, data); err != nil {
		t.Fatal(err)
	}
	return w.Body.String()
}

const hostileDiff = `diff --git "a/<script>alert(1)</script>\tx" "b/<script>alert(1)</script>\tx"
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ "b/<script>alert(1)</script>\tx"
@@ -0,0 +1,2 @@
+<img src=x onerror=alert(2)>
+" style="color:red
diff --git a/old name.go b/old name.go
index 1111111..2222222 100644
--- a/old name.go
+++ b/old name.go
@@ -1,4 +1,4 @@ func main() {
 package main
--- not a header
+<b>bold</b>
 }
\ No newline at end of file
diff --git a/img.png b/img.png
index 1111111..2222222 100644
Binary files a/img.png and b/img.png differ
`

func TestParseDiff(t *testing.T) {
	files := parseDiff([]byte(hostileDiff))
	if len(files) != 3 {
		t.Fatalf("%d files, want 3: %+v", len(files), files)
	}
	if got := files[0].Name(); got != "<script>alert(1)</script>\tx" {
		t.Errorf("quoted name %q", got)
	}
	if files[0].Old != "" || len(files[0].Hunks) != 1 || len(files[0].Hunks[0].Lines) != 2 || files[0].Hunks[0].Lines[1].New != 2 {
		t.Errorf("new file: %+v", files[0])
	}
	h := files[1].Hunks[0]
	want := []diffLine{
		{Kind: "ctx", Old: 1, New: 1, Text: "package main"},
		{Kind: "del", Old: 2, Text: "-- not a header"},
		{Kind: "add", New: 2, Text: "<b>bold</b>"},
		{Kind: "ctx", Old: 3, New: 3, Text: "}"},
		{Kind: "note", Text: `\ No newline at end of file`},
	}
	if files[1].Name() != "old name.go" || fmt.Sprint(h.Lines) != fmt.Sprint(want) {
		t.Errorf("hunk of %q: %+v, want %+v", files[1].Name(), h.Lines, want)
	}
	if rows := h.Rows(); len(rows) != 4 || rows[1].Left.Kind != "del" || rows[1].Right.Kind != "add" {
		t.Errorf("split rows %+v", rows)
	}
	if !files[2].Binary || files[2].Name() != "img.png" {
		t.Errorf("binary file: %+v", files[2])
	}
}

func TestDiffFragmentEscapes(t *testing.T) {
	for _, view := range []string{viewUnified, viewSplit} {
		html := fragmentHTML(t, "diff-view", diffData{View: view, Files: parseDiff([]byte(hostileDiff))})
		for _, bad := range []string{"<script>", "<img", "<b>", `" style=`} {
			if strings.Contains(html, bad) {
				t.Errorf("%s view has %q unescaped:\n%s", view, bad, html)
			}
		}
		for _, good := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(2)&gt;", "&lt;b&gt;bold&lt;/b&gt;", "binary file changed"} {
			if !strings.Contains(html, good) {
				t.Errorf("%s view lacks %q:\n%s", view, good, html)
			}
		}
	}
}

func TestDiffCapped(t *testing.T) {
	cw := &capWriter{n: MaxDiffBytes}
	fmt.Fprintf(cw, "diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -0,0 +1,300000 @@\n")
	for i := range 300000 {
		fmt.Fprintf(cw, "+line %d of a huge file\n", i)
	}
	b, cut := cw.cut()
	if !cut || len(b) > MaxDiffBytes || b[len(b)-1] != '\n' {
		t.Fatalf("cut %v, %d bytes kept of %d", cut, len(b), cw.total)
	}
	files := parseDiff(b)
	html := fragmentHTML(t, "diff-view", diffData{View: viewUnified, Files: files, Truncated: cut, Bytes: cw.total})
	if n := len(files[0].Hunks[0].Lines); n >= 300000 || n < 1000 {
		t.Errorf("%d lines parsed", n)
	}
	if !strings.Contains(html, "only its first 1 MiB is shown") {
		t.Error("the fragment does not say the diff was cut")
	}
}

// testWorkspace makes a workspace with a file, a directory, a link inside
// and a link out of it, and returns it opened as an os.Root.
func testWorkspace(t *testing.T) *os.Root {
	t.Helper()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("the host's secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\"<script>\") }\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "<b>x.bin"), []byte("\x00\x01\x02binary"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out")))
	must(os.Symlink("../../"+filepath.Base(outside), filepath.Join(dir, "sub", "up")))
	must(os.Symlink("main.go", filepath.Join(dir, "in")))
	root, err := os.OpenRoot(dir)
	must(err)
	t.Cleanup(func() { root.Close() })
	return root
}

func TestTreeListsLinksWithoutFollowing(t *testing.T) {
	root := testWorkspace(t)
	d, err := listTree(root, ".", true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range d.Entries {
		got = append(got, e.Name+":"+e.Kind)
	}
	if want := "sub:dir <b>x.bin:file in:link main.go:file out:link"; strings.Join(got, " ") != want {
		t.Errorf("entries %q, want %q", strings.Join(got, " "), want)
	}
	html := fragmentHTML(t, "tree", d)
	if strings.Contains(html, "<b>") || !strings.Contains(html, "&lt;b&gt;x.bin") || !strings.Contains(html, `data-file="main.go"`) {
		t.Errorf("tree fragment:\n%s", html)
	}
	if _, err := listTree(root, "sub/up", true); err == nil {
		t.Error("a link out of the workspace was listed as a directory")
	}
	if _, _, err := readView(root, "out"); err == nil {
		t.Error("a link out of the workspace was read")
	}
	if _, err := cleanPath("../etc"); err == nil {
		t.Error("../etc accepted")
	}
}

// viewFile reads and highlights file p of root as View does.
func viewFile(t *testing.T, root *os.Root, p string) (viewData, error) {
	t.Helper()
	d, text, err := readView(root, p)
	if err == nil && !d.Binary {
		d.highlighted = testHighlighter(t, 10*time.Second, 1).highlight(t.Context(), p, text)
	}
	return d, err
}

func TestViewHighlights(t *testing.T) {
	root := testWorkspace(t)
	d, err := viewFile(t, root, "main.go")
	if err != nil {
		t.Fatal(err)
	}
	html := fragmentHTML(t, "file-view", d)
	if d.Language != "Go" || !strings.Contains(html, `<span class="kn">package</span>`) ||
		!strings.Contains(html, "&lt;script&gt;") || strings.Contains(html, "<script>") || strings.Contains(html, "style=") {
		t.Errorf("%s view:\n%s", d.Language, html)
	}
	if d, err = viewFile(t, root, "in"); err != nil || d.Size == 0 {
		t.Errorf("a link within the workspace: %v", err)
	}
	if d, err = viewFile(t, root, "<b>x.bin"); err != nil || !d.Binary {
		t.Fatalf("binary: %+v %v", d, err)
	}
	d.Download = "/v1/jobs/j/files/" + escapePath(d.Path)
	if html := fragmentHTML(t, "file-view", d); !strings.Contains(html, "binary, 9 bytes") || !strings.Contains(html, `href="/v1/jobs/j/files/%3Cb%3Ex.bin"`) {
		t.Errorf("binary view:\n%s", html)
	}
}

func TestViewCapped(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("a line of text, long enough\n", 2*MaxViewBytes/28)
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	d, err := viewFile(t, root, "big.txt")
	if err != nil || !d.Cut || d.Binary || len(d.Lines) > MaxViewBytes/28+1 {
		t.Fatalf("cut %v binary %v, %d lines, %v", d.Cut, d.Binary, len(d.Lines), err)
	}
	if html := fragmentHTML(t, "file-view", d); !strings.Contains(html, "only its first 1 MiB is shown") {
		t.Error("the view does not say the file was cut")
	}
}

// TestLinesCapped: a MiB of empty lines, in a file or a diff, is cut to
// MaxViewLines and MaxDiffLines rows, not a million the browser freezes on.
func TestLinesCapped(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty-lines.txt"), []byte(strings.Repeat("\n", MaxViewBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	d, err := viewFile(t, root, "empty-lines.txt")
	if err != nil || !d.Cut || len(d.Lines) > MaxViewLines+1 {
		t.Fatalf("cut %v, %d lines, %v; want at most %d", d.Cut, len(d.Lines), err, MaxViewLines+1)
	}
	if html := fragmentHTML(t, "file-view", d); !strings.Contains(html, "only its first 1 MiB is shown, 20,000 lines at most") {
		t.Error("the view does not say the file was cut")
	}

	b, cut := cutLines([]byte("diff --git a/x b/x\n@@ -0,0 +1,500000 @@\n"+strings.Repeat("+\n", 500000)), MaxDiffLines, false)
	if files := parseDiff(b); !cut || len(files[0].Hunks[0].Lines) > MaxDiffLines {
		t.Fatalf("cut %v, %d diff lines; want at most %d", cut, len(files[0].Hunks[0].Lines), MaxDiffLines)
	}
	if b, cut := cutLines([]byte("a\nb\n"), 2, false); cut || string(b) != "a\nb\n" {
		t.Errorf("two lines cut to 2: %q, %v", b, cut)
	}
}

// TestRunningJobTabs: a running job's Files tab offers its zip, saying
// it is a snapshot taken when asked for, without taking one to render
// the page.
func TestRunningJobTabs(t *testing.T) {
	s := newLog()
	s.noWorkspace = fmt.Errorf("%w: the page took a snapshot", jobs.ErrNotEnded)
	r := httptest.NewRequest("GET", "/jobs/j1", nil)
	r.SetPathValue("id", "j1")
	w := httptest.NewRecorder()
	if err := New(Config{}, s, nil).Job(w, r, Session{CSRF: "c"}); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(w.Body.String(), `id="files-panel"`)
	if i < 0 {
		t.Fatalf("no files panel:\n%s", w.Body.String())
	}
	panel := w.Body.String()[i:]
	panel = panel[:strings.Index(panel, "</section>")]
	if !strings.Contains(panel, "a snapshot of its workspace taken when you ask") || !strings.Contains(panel, "artifacts.zip") {
		t.Errorf("the files panel of a running job:\n%s", panel)
	}
}

// TestTreeLeavesOutIgnored: the Files tab leaves out what the
// workspace's .gitignore and the common caches would, counting them,
// and lists them with all.
func TestTreeLeavesOutIgnored(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"src/__pycache__/m.pyc", "src/m.py", "build/out.o", "app.log", "keep.txt", "node_modules/x/i.js"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n/build/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	names := func(d treeData) string {
		var out []string
		for _, e := range d.Entries {
			out = append(out, e.Name)
		}
		return strings.Join(out, " ")
	}
	d, err := listTree(root, ".", false)
	if err != nil || names(d) != "src .gitignore keep.txt" || d.Hidden != 3 {
		t.Errorf("root: %q, %d hidden, %v", names(d), d.Hidden, err)
	}
	if html := fragmentHTML(t, "tree", d); !strings.Contains(html, "3 left out") || !strings.Contains(html, "tree-all") {
		t.Errorf("tree fragment says nothing of what it left out:\n%s", html)
	}
	if d, _ := listTree(root, "src", false); names(d) != "m.py" || d.Hidden != 1 {
		t.Errorf("src: %q, %d hidden", names(d), d.Hidden)
	}
	if d, _ := listTree(root, ".", true); names(d) != "build node_modules src .gitignore app.log keep.txt" || d.Hidden != 0 {
		t.Errorf("root with all: %q, %d hidden", names(d), d.Hidden)
	}
}

// TestDeletedJobShown: a deleted job says so in the list and on its page,
// which offers no zip.
func TestDeletedJobShown(t *testing.T) {
	j := store.Job{ID: "j1", Task: "t", Status: store.StatusComplete, DeletedAt: time.Now(), CreatedAt: time.Now()}
	u := New(Config{}, nil, nil)
	w := httptest.NewRecorder()
	if err := u.fragment(w, "jobs", "rows", listData{Jobs: []store.Job{j}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.Body.String(), `status-deleted">deleted<`) {
		t.Errorf("the list row of a deleted job:\n%s", w.Body.String())
	}
	h := fragmentHTML(t, "job-summary", u.header(j))
	if !strings.Contains(h, "complete, deleted") || strings.Contains(h, `id="zip"`) {
		t.Errorf("the header of a deleted job:\n%s", h)
	}
	td, _ := u.tabsData(httptest.NewRequest("GET", "/jobs/j1", nil), j)
	if !td.(tabs).Deleted {
		t.Error("the tabs of a deleted job do not know it")
	}
}

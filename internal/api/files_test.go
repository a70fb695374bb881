package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// endedJobWithWorkspace makes a complete job whose workspace holds files, a
// directory, symlinks inside and out (to /etc) and a FIFO.
func endedJobWithWorkspace(t *testing.T, e *apitest.Env) string {
	t.Helper()
	id := e.Submit("x").ID
	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "hello.txt", "hello\n")
	e.WriteFile(id, "src/app/main.py", "print(42)\n")
	ws := e.Workspace(id)
	for name, target := range map[string]string{"etc": "/etc", "passwd": "/etc/passwd", "up": "../..", "inside": "hello.txt"} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return id
}

const etcPasswdMarker = "root:"

func TestFileTraversal(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := endedJobWithWorkspace(t, e)
	base := "/v1/jobs/" + id + "/files/"
	tests := []struct {
		path   string
		status int
	}{
		{"../../../../../../etc/passwd", 400},
		{"%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", 400},
		{"%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", 400},
		{"..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd", 400},
		{"src/..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd", 400},
		{"%2Fetc%2Fpasswd", 400},
		{"/etc/passwd", 400},
		{"./hello.txt", 400},
		{"etc/passwd", 404},
		{"passwd", 404},
		{"up/up/etc/passwd", 404},
		{"up", 404},
		{"missing.txt", 404},
		{"src", 400},
		{"src/app", 400},
		{"fifo", 400},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, b := do(t, e, req{method: "GET", path: base + tt.path})
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q, want a JSON error", resp.Header.Get("Content-Type"))
			}
			if strings.Contains(string(b), etcPasswdMarker) {
				t.Fatalf("body holds /etc/passwd data: %s", b)
			}
		})
	}
}

func TestFileDownload(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := endedJobWithWorkspace(t, e)
	for path, want := range map[string]string{"hello.txt": "hello\n", "src/app/main.py": "print(42)\n", "inside": "hello\n", "src%2Fapp%2Fmain.py": "print(42)\n"} {
		resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/" + path})
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("%s: %d %q, want %q", path, resp.StatusCode, b, want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/hello.txt", header: map[string]string{"Range": "bytes=1-3"}})
	if resp.StatusCode != http.StatusPartialContent || string(b) != "ell" {
		t.Errorf("range: %d %q", resp.StatusCode, b)
	}
}

func TestArtifactsZip(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := endedJobWithWorkspace(t, e)
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/artifacts.zip"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("status %d, type %q: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if !strings.Contains(resp.Header.Get("Content-Disposition"), id+".zip") {
		t.Errorf("Content-Disposition %q", resp.Header.Get("Content-Disposition"))
	}
	entries := readZip(t, b)
	want := map[string]string{
		"hello.txt": "hello\n", "src/": "", "src/app/": "", "src/app/main.py": "print(42)\n", "inside": "link:hello.txt",
	}
	for name, content := range want {
		if got, ok := entries[name]; !ok || got != content {
			t.Errorf("entry %s = %q (present %v), want %q", name, got, ok, content)
		}
	}
	// Links out of the workspace are left out, and the manifest says why.
	manifest := entries[artifact.ManifestName]
	for _, link := range []string{`"etc": symlink to "/etc"`, `"passwd": symlink to "/etc/passwd"`, `"up": symlink to "../.."`} {
		if !strings.Contains(manifest, "left out "+link+", outside the workspace") {
			t.Errorf("manifest lacks %s:\n%s", link, manifest)
		}
	}
	if len(entries) != len(want)+1 {
		t.Errorf("entries %v, want exactly %v and the manifest (no FIFO, nothing followed)", keys(entries), keys(want))
	}
	if bytes.Contains(b, []byte(etcPasswdMarker)) {
		t.Error("zip holds /etc/passwd data")
	}
}

// readZip returns each entry's content, or "link:<target>" for symlinks.
func readZip(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Mode()&fs.ModeSymlink != 0 {
			data = append([]byte("link:"), data...)
		}
		out[f.Name] = string(data)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestArtifactsOfEndedJobWithoutWorkspace(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.Finish(id, store.StatusError, "sandbox never started")
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/artifacts.zip"})
	if got := wantError(t, resp, b, http.StatusNotFound, wire.CodeNotFound); !strings.Contains(got.Message, "no workspace") {
		t.Errorf("message %q", got.Message)
	}
}

// TestFileRefusalsSayWhatToDo: a pending job's files say to wait for it
// to start; a deleted job's that there is nothing to download; a
// directory without ?list how to list it; a symlink out names its target.
func TestFileRefusalsSayWhatToDo(t *testing.T) {
	e := apitest.New(t, api.Config{})
	pending := e.Submit("x").ID
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + pending + "/files/"})
	if d := wantError(t, resp, b, http.StatusConflict, wire.CodeNotEnded); !strings.Contains(d.Message, "wait for the job to start") {
		t.Errorf("pending: %q", d.Message)
	}
	id := endedJobWithWorkspace(t, e)
	resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/src"})
	if d := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest); !strings.Contains(d.Message, "?list") {
		t.Errorf("a directory: %q", d.Message)
	}
	resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/passwd"})
	if d := wantError(t, resp, b, http.StatusNotFound, wire.CodeNotFound); !strings.Contains(d.Message, "symlink to /etc/passwd") || !strings.Contains(d.Message, "zip") {
		t.Errorf("a symlink out: %q", d.Message)
	}
	resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/etc?list"})
	if d := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest); !strings.Contains(d.Message, "symlink to /etc") {
		t.Errorf("listing a symlink: %q", d.Message)
	}
	var l wire.FileList
	resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/"})
	if resp.StatusCode != 200 {
		t.Fatalf("root listing: %d %s", resp.StatusCode, b)
	}
	l = decode[wire.FileList](t, b)
	types := map[string]string{}
	for _, en := range l.Entries {
		types[en.Name] = en.Type + ":" + en.Target
	}
	if types["etc"] != "symlink:/etc" || types["src"] != "dir:" || types["hello.txt"] != "file:" || types["fifo"] != "fifo:" || !l.SnapshotAt.IsZero() {
		t.Errorf("root listing of an ended job: %+v", l)
	}
	e.WriteFile(id, ".cfg/a.toml", "a = 1\n")
	resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/.cfg/"})
	if l := decode[wire.FileList](t, b); resp.StatusCode != 200 || l.Path != ".cfg" || len(l.Entries) != 1 || l.Entries[0].Name != "a.toml" {
		t.Errorf("listing .cfg: %d %+v", resp.StatusCode, l)
	}
	if _, err := e.Svc.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/files/", "/files/hello.txt", "/artifacts.zip"} {
		resp, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + p})
		if d := wantError(t, resp, b, http.StatusGone, wire.CodeDeleted); !strings.Contains(d.Message, "nothing to download") {
			t.Errorf("%s of a deleted job: %q", p, d.Message)
		}
	}
}

// TestListingBoundsIgnoreWork: a listing leaves out what the workspace's
// .gitignore files ignore, and their rules are the sandbox's to write. With
// thousands of rules, each tried against each entry and each directory
// above it, one listing of a directory of ignored files took minutes of a
// core (the UI's Files tab lists that way by default). The work one
// listing spends on the rules is bounded; past it, entries are listed
// whatever the rules say.
func TestListingBoundsIgnoreWork(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	var rules strings.Builder
	rules.WriteString("*.x\n")
	for i := range 9_999 {
		fmt.Fprintf(&rules, "a*b*c*d*e*f*g*h*i*j*k%d\n", i)
	}
	e.WriteFile(id, ".gitignore", rules.String())
	const sub = "d/e/f/g/h/i"
	e.WriteFile(id, sub+"/keep.txt", "kept\n")
	dir := filepath.Join(e.Workspace(id), filepath.FromSlash(sub))
	for i := range 30_000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.x", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/" + sub + "/"})
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listing: %d %.300s", resp.StatusCode, b)
	}
	l := decode[wire.FileList](t, b)
	t.Logf("listing took %v: %d entries, %d hidden, truncated %v", took, len(l.Entries), l.Hidden, l.Truncated)
	if !l.Truncated && !slices.ContainsFunc(l.Entries, func(en wire.FileEntry) bool { return en.Name == "keep.txt" }) {
		t.Errorf("keep.txt is not listed, and the listing does not say it was cut: %d entries", len(l.Entries))
	}
	if took > 15*time.Second {
		t.Errorf("a listing under 10,000 .gitignore rules took %v; want it bounded (a few seconds at most)", took)
	}
}

// TestFilePathLength: a sandbox can nest directories far deeper than a
// path the kernel takes in one call, and each request for a path in them
// walked it once per level (its .gitignore files, the symlink search of a
// 404): at 4,000 levels, 8 seconds of a core a request, growing with the
// square of the depth. A path longer than PATH_MAX is refused first.
func TestFilePathLength(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "x", "")
	const depth = 2100
	fd, err := syscall.Open(e.Workspace(id), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := syscall.Mkdirat(fd, "a", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := syscall.Openat(fd, "a", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	syscall.Close(fd)
	deep := strings.Repeat("a/", depth) // 4,200 bytes
	for _, p := range []string{"/v1/jobs/" + id + "/files/" + deep, "/v1/jobs/" + id + "/files/" + deep + "missing",
		"/ui/jobs/" + id + "/tree?path=" + strings.TrimSuffix(deep, "/"), "/ui/jobs/" + id + "/view?path=" + deep + "missing"} {
		resp, b := do(t, e, req{method: "GET", path: p})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "4096") {
			t.Errorf("GET %.60s… (%d bytes): %d %.200s; want 400 saying a path has at most 4096 bytes", p, len(p), resp.StatusCode, b)
		}
	}
	if resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/files/" + strings.Repeat("a/", 100)}); resp.StatusCode != http.StatusOK {
		t.Errorf("a listing 100 levels down: %d %.200s", resp.StatusCode, b)
	}
}

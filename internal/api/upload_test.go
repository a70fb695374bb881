package api_test

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// entry is one entry of a test archive: 'f' file, 'd' directory, 'l'
// symlink, 'h' hard link, 'c' character device.
type entry struct {
	kind       byte
	name, body string
}

func tarGzOf(t *testing.T, ents ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	types := map[byte]byte{'f': tar.TypeReg, 'd': tar.TypeDir, 'l': tar.TypeSymlink, 'h': tar.TypeLink, 'c': tar.TypeChar}
	for _, e := range ents {
		hdr := &tar.Header{Typeflag: types[e.kind], Name: e.name, Mode: 0o644}
		switch e.kind {
		case 'l', 'h':
			hdr.Linkname = e.body
		case 'f':
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.kind == 'f' {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// zipOf is a zip of files (name → content).
func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	return buf.Bytes()
}

// part is one part of a multipart body.
type part struct{ name, file, body string }

func jobPart(json string) part { return part{name: "job", body: json} }
func workspacePart(archive []byte) part {
	return part{name: "workspace", file: "ws", body: string(archive)}
}

// postMultipart sends a multipart submission to path.
func postMultipart(t *testing.T, e *apitest.Env, path string, header map[string]string, parts ...part) (*http.Response, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.file != "" {
			w, err = mw.CreateFormFile(p.name, p.file)
		} else {
			w, err = mw.CreateFormField(p.name)
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p.body)
	}
	mw.Close()
	h := map[string]string{"Content-Type": mw.FormDataContentType()}
	for k, v := range header {
		h[k] = v
	}
	return do(t, e, req{method: "POST", path: path, body: buf.String(), header: h})
}

// dataDir lists every path under the data dir but the store's files.
func dataDir(t *testing.T, e *apitest.Env) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(e.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.DataDir, p)
		if !strings.HasPrefix(rel, "agentbox.db") {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestUploadGood: a workspace sent with its job, as a tar.gz or a zip,
// before or after the job's JSON, is the job's workspace when it is
// created; nothing else is written.
func TestUploadGood(t *testing.T) {
	e := apitest.New(t, api.Config{})
	files := map[string]string{"src/app.py": "print('hi')\n", "README.md": "# r\n"}
	tgz := tarGzOf(t, entry{'f', "src/app.py", files["src/app.py"]}, entry{'f', "README.md", files["README.md"]},
		entry{'l', "link", "src/app.py"})
	for _, tt := range []struct {
		name  string
		parts []part
	}{
		{"tar.gz after the job", []part{jobPart(`{"task":"t"}`), workspacePart(tgz)}},
		{"tar.gz before the job", []part{workspacePart(tgz), jobPart(`{"task":"t"}`)}},
		{"zip", []part{jobPart(`{"task":"t"}`), workspacePart(zipOf(t, files))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := dataDir(t, e)
			resp, b := postMultipart(t, e, "/v1/jobs", nil, tt.parts...)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			id := decode[wire.SubmitResponse](t, b).JobID
			for name, want := range files {
				got, err := os.ReadFile(filepath.Join(e.Workspaces.Dir(id), name))
				if string(got) != want || err != nil {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
			for _, p := range dataDir(t, e) {
				if !slices.Contains(before, p) && p != "workspaces" && !strings.HasPrefix(p, filepath.Join("workspaces", id)) {
					t.Errorf("written outside the job's workspace: %s", p)
				}
			}
			if j := getJob(t, e, id); j.Status != "pending" || j.Task != "t" {
				t.Errorf("job %+v", j)
			}
		})
	}
}

// bomb is a tar.gz of one file of n zeros: about a thousand bytes out
// for each byte in.
func bomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "zeros", Mode: 0o644, Size: int64(n)})
	zero := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(zero) {
		tw.Write(zero[:min(left, len(zero))])
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// manyEntries is a zip of n empty files.
func manyEntries(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("d%d/f%d", i%100, i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	return buf.Bytes()
}

// TestUploadRefused: every bad upload or submission with one gets its
// 4xx, and leaves nothing: no job, nothing in the data dir, nothing
// outside it.
func TestUploadRefused(t *testing.T) {
	e := apitest.New(t, api.Config{MaxUploadBytes: 4 << 20})
	roomy := apitest.New(t, api.Config{}) // 1 GiB: room for a bomb past its ratio's floor
	roomy.Workspace("job_before")         // the store's directory is there, as e's
	done := e.Submit("done").ID
	e.Finish(done, store.StatusComplete, "")
	e.WriteFile(done, "a.txt", "a")
	outside := t.TempDir()
	random := make([]byte, 5<<20)
	rand.Read(random)
	job := jobPart(`{"task":"t"}`)
	good := workspacePart(tarGzOf(t, entry{'f', "ok.txt", "ok"}))
	for _, tt := range []struct {
		name   string
		parts  []part
		status int
		says   string
	}{
		{"absolute path", []part{job, workspacePart(tarGzOf(t, entry{'f', "/etc/evil", "x"}))}, 400, "absolute"},
		{"dotdot", []part{job, workspacePart(tarGzOf(t, entry{'f', "a/../../evil", "x"}))}, 400, ".."},
		{"symlink out, then a write through it", []part{job, workspacePart(tarGzOf(t, entry{'l', "out", outside}, entry{'f', "out/pwned", "x"}))}, 400, "outside"},
		{"relative symlink out", []part{job, workspacePart(tarGzOf(t, entry{'d', "d", ""}, entry{'l', "d/up", "../../x"}))}, 400, "outside"},
		{"hard link out", []part{job, workspacePart(tarGzOf(t, entry{'h', "passwd", "/etc/passwd"}))}, 400, "outside"},
		{"hard link dotdot", []part{job, workspacePart(tarGzOf(t, entry{'h', "x", "../../etc/passwd"}))}, 400, "outside"},
		{"device file", []part{workspacePart(tarGzOf(t, entry{'f', "ok", "x"}, entry{'c', "null", ""})), job}, 400, "device"},
		{"zip bomb", []part{job, workspacePart(bomb(t, 80<<20))}, 400, "bomb"},
		{"over AGENTBOX_MAX_UPLOAD bytes", []part{job, workspacePart(tarGzOf(t, entry{'f', "big", string(random)}))}, 413, "too large"},
		{"over 200,000 entries", []part{job, workspacePart(manyEntries(t, 200_001))}, 413, "200000 entries"},
		{"not an archive", []part{job, workspacePart([]byte("plain text"))}, 400, "neither a zip nor a tar.gz"},
		{"an empty workspace part", []part{job, workspacePart(nil)}, 400, "empty"},
		{"corrupt tar.gz", []part{job, workspacePart(tarGzOf(t, entry{'f', "a", strings.Repeat("x", 5000)})[:40])}, 400, "bad archive"},
		{"no job part", []part{good}, 400, "no \"job\" part"},
		{"two job parts", []part{job, job, good}, 400, "two"},
		{"unknown part", []part{job, {name: "extra", body: "x"}, good}, 400, "unknown part"},
		{"bad JSON, workspace after", []part{jobPart(`{"task":`), good}, 400, "JSON"},
		{"bad JSON, workspace before", []part{good, jobPart(`{"task":`)}, 400, "JSON"},
		{"invalid task, workspace before", []part{good, jobPart(`{"task":" "}`)}, 422, "task is empty"},
		{"job part over 1 MiB", []part{jobPart(`{"task":"` + strings.Repeat("x", 2<<20) + `"}`), good}, 413, "larger than"},
		{"with workspace_from", []part{jobPart(`{"task":"t","workspace_from":"` + done + `"}`), good}, 400, "workspace_from"},
		{"with workspace_from, workspace first", []part{good, jobPart(`{"task":"t","workspace_from":"` + done + `"}`)}, 400, "workspace_from"},
		{"with a repo", []part{good, jobPart(`{"task":"t","repo":{"url":"https://example.com/r.git"}}`)}, 400, "repo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := e
			if tt.name == "zip bomb" || tt.name == "over 200,000 entries" {
				e = roomy
			}
			before, jobs := dataDir(t, e), len(listJobs(t, e, "").Jobs)
			resp, b := postMultipart(t, e, "/v1/jobs", nil, tt.parts...)
			code := map[int]string{400: wire.CodeBadRequest, 413: wire.CodeTooLarge, 422: wire.CodeValidation}[tt.status]
			if got := wantError(t, resp, b, tt.status, code); !strings.Contains(got.Message, tt.says) {
				t.Errorf("message %q does not say %q", got.Message, tt.says)
			}
			if after := dataDir(t, e); !slices.Equal(after, before) {
				t.Errorf("data dir after: %v\nbefore: %v", after, before)
			}
			if n := len(listJobs(t, e, "").Jobs); n != jobs {
				t.Errorf("%d jobs, want the %d before", n, jobs)
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("written outside: %v", ents)
			}
		})
	}
}

// TestUploadBodyLimit: a multipart body larger than the upload limit and
// its slack is refused before it is read.
func TestUploadBodyLimit(t *testing.T) {
	e := apitest.New(t, api.Config{MaxUploadBytes: 1 << 20, MaxBodyBytes: 1 << 10})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n", apitest.Token, 200<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp, b, 413, wire.CodeTooLarge)
}

// TestUploadIdempotent: replaying an Idempotency-Key with the same job and
// upload answers the first job and keeps nothing of the replay; with
// another upload it is a conflict.
func TestUploadIdempotent(t *testing.T) {
	e := apitest.New(t, api.Config{})
	key := map[string]string{"Idempotency-Key": "up-1"}
	tgz := tarGzOf(t, entry{'f', "a.txt", "a"})
	r1, b1 := postMultipart(t, e, "/v1/jobs", key, jobPart(`{"task":"t"}`), workspacePart(tgz))
	if r1.StatusCode != 201 {
		t.Fatalf("first: %d %s", r1.StatusCode, b1)
	}
	before := dataDir(t, e)
	r2, b2 := postMultipart(t, e, "/v1/jobs", key, workspacePart(tgz), jobPart(`{"task":"t"}`))
	first, again := decode[wire.SubmitResponse](t, b1), decode[wire.SubmitResponse](t, b2)
	if r2.StatusCode != 201 || again.JobID != first.JobID || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s, want 201 with %s replayed", r2.StatusCode, b2, first.JobID)
	}
	resp, b := postMultipart(t, e, "/v1/jobs", key, jobPart(`{"task":"t"}`), workspacePart(tarGzOf(t, entry{'f', "b.txt", "b"})))
	wantError(t, resp, b, http.StatusUnprocessableEntity, wire.CodeIdempotencyConflict)
	resp, b = do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"t"}`, header: key})
	wantError(t, resp, b, http.StatusUnprocessableEntity, wire.CodeIdempotencyConflict)
	if after := dataDir(t, e); !slices.Equal(after, before) {
		t.Errorf("data dir after the replays: %v\nbefore: %v", after, before)
	}
}

// TestUploadLegacyAliases: /submit takes a multipart submission too.
func TestUploadLegacyAliases(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, b := postMultipart(t, e, "/submit", nil, jobPart(`{"task":"t"}`), workspacePart(tarGzOf(t, entry{'f', "a.txt", "a"})))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	id := decode[wire.LegacySubmitResponse](t, b).JobID
	if got, err := os.ReadFile(filepath.Join(e.Workspaces.Dir(id), "a.txt")); string(got) != "a" || err != nil {
		t.Errorf("a.txt = %q, %v", got, err)
	}
}

// TestWorkspaceFrom: a job starts from a copy of an ended job's
// workspace; one that cannot is a 400 naming the job, leaving nothing.
func TestWorkspaceFrom(t *testing.T) {
	e := apitest.New(t, api.Config{})
	done := e.Submit("done").ID
	e.Finish(done, store.StatusComplete, "")
	e.WriteFile(done, "src/a.txt", "from the first job")
	sr := submit(t, e, `{"task":"more","workspace_from":"`+done+`"}`)
	if got, err := os.ReadFile(filepath.Join(e.Workspaces.Dir(sr.JobID), "src/a.txt")); string(got) != "from the first job" || err != nil {
		t.Errorf("the copy's a.txt = %q, %v", got, err)
	}
	if j := getJob(t, e, sr.JobID); j.WorkspaceFrom != done {
		t.Errorf("workspace_from = %q", j.WorkspaceFrom)
	}
	running := e.Submit("running").ID
	e.Start(running)
	deleted := e.Submit("deleted").ID
	e.Finish(deleted, store.StatusComplete, "")
	e.WriteFile(deleted, "x", "x")
	deleteJob(t, e, deleted)
	before := dataDir(t, e)
	for _, tt := range []struct{ body, says string }{
		{`{"task":"t","workspace_from":"job_nope"}`, "no job \"job_nope\""},
		{`{"task":"t","workspace_from":"` + running + `"}`, running + " has not ended"},
		{`{"task":"t","workspace_from":"` + deleted + `"}`, deleted + " was deleted"},
		{`{"task":"t","workspace_from":"` + done + `","repo":{"url":"https://example.com/r.git"}}`, "workspace_from and repo"},
	} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: tt.body})
		if got := wantError(t, resp, b, 400, wire.CodeBadRequest); !strings.Contains(got.Message, tt.says) {
			t.Errorf("%s: message %q does not say %q", tt.body, got.Message, tt.says)
		}
	}
	if after := dataDir(t, e); !slices.Equal(after, before) {
		t.Errorf("data dir after: %v\nbefore: %v", after, before)
	}
}

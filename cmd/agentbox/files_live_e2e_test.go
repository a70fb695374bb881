package main

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/wire"
)

// names lists a FileList's entry names.
func names(l wire.FileList) []string {
	var out []string
	for _, e := range l.Entries {
		out = append(out, e.Name)
	}
	return out
}

// fetchAll GETs path with the token and returns its status and body.
func (s *server) fetchAll(path string) (int, []byte) {
	req, _ := http.NewRequest("GET", s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestRunningJobFiles: a running job's files are listed (the root with a
// trailing slash, a directory with ?list), read and zipped while it runs,
// from a snapshot; caches are left out unless ?all=1.
func TestRunningJobFiles(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id := s.submitJob(t, map[string]any{"task": "echo hi > a.txt; mkdir d __pycache__; echo b > d/b.txt; echo c > __pycache__/m.pyc; touch z-ready; sleep 60"})
	base := "/v1/jobs/" + id + "/files/"
	var root wire.FileList
	waitUntil(t, time.Minute, func() bool {
		return s.do("GET", base, nil, &root) == 200 && slices.Contains(names(root), "z-ready")
	})
	if got := s.job(id).Status; got != "running" {
		t.Fatalf("job is %s, want it running while its files are read", got)
	}
	if root.SnapshotAt.IsZero() || slices.Contains(names(root), "__pycache__") || root.Hidden != 1 {
		t.Errorf("root listing: %+v, want a snapshot time and __pycache__ hidden", root)
	}
	for _, e := range root.Entries {
		if e.Name == "a.txt" && (e.Type != "file" || e.Size != 3 || e.Mode == "" || e.MTime.IsZero()) {
			t.Errorf("a.txt: %+v", e)
		}
	}
	var all wire.FileList
	if code := s.do("GET", base+"?all=1", nil, &all); code != 200 || !slices.Contains(names(all), "__pycache__") {
		t.Errorf("?all=1: %d %v", code, names(all))
	}
	var d wire.FileList
	if code := s.do("GET", base+"d?list", nil, &d); code != 200 || !slices.Equal(names(d), []string{"b.txt"}) || d.Path != "d" {
		t.Errorf("d?list: %d %+v", code, d)
	}
	if code, b := s.fetchAll(base + "a.txt"); code != 200 || string(b) != "hi\n" {
		t.Errorf("a.txt: %d %q", code, b)
	}
	if code, b := s.fetchAll(base + "d"); code != 400 || !strings.Contains(string(b), "?list") {
		t.Errorf("a directory without ?list: %d %s", code, b)
	}
	code, b := s.fetchAll("/v1/jobs/" + id + "/artifacts.zip")
	if code != 200 {
		t.Fatalf("zip of a running job: %d %s", code, b)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var zipped []string
	for _, f := range zr.File {
		zipped = append(zipped, f.Name)
	}
	if !slices.Contains(zipped, "a.txt") || !slices.Contains(zipped, "d/b.txt") {
		t.Errorf("zip of a running job holds %v", zipped)
	}
	// The UI's Files tab: its tree and viewer while the job runs.
	if code, b := s.fetchAll("/ui/jobs/" + id + "/tree?path="); code != 200 || !strings.Contains(string(b), `data-file="a.txt"`) ||
		!strings.Contains(string(b), "a snapshot taken at") || strings.Contains(string(b), "__pycache__/") {
		t.Errorf("the Files tab's tree of a running job: %d\n%s", code, b)
	}
	if code, b := s.fetchAll("/ui/jobs/" + id + "/view?path=d%2Fb.txt"); code != 200 || !strings.Contains(string(b), "d/b.txt") {
		t.Errorf("the Files tab's viewer of a running job: %d\n%s", code, b)
	}
	if got := s.job(id).Status; got != "running" {
		t.Errorf("job is %s after its files were read, want running", got)
	}
	s.do("POST", "/v1/jobs/"+id+"/cancel", nil, nil)
}

// TestRunningJobFilesSwapAttack: the sandbox swaps a directory for a
// link to / in a loop while the host lists, reads and zips the job's
// files: nothing outside the workspace is ever served.
func TestRunningJobFilesSwapAttack(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id := s.submitJob(t, map[string]any{"task": "touch ready; end=$(($(date +%s)+60)); while [ $(date +%s) -lt $end ]; do " +
		"rm -rf d; mkdir d; echo x > d/f; rm -rf d; ln -s / d; done"})
	base := "/v1/jobs/" + id + "/files/"
	waitUntil(t, time.Minute, func() bool {
		code, _ := s.fetchAll(base + "ready")
		return code == 200
	})
	deadline := time.Now().Add(15 * time.Second)
	var mu sync.Mutex
	var served []string
	var wg sync.WaitGroup
	check := func(what string, ok bool) {
		if !ok {
			mu.Lock()
			served = append(served, what)
			mu.Unlock()
		}
	}
	counts := make([]int, 4)
	for i, probe := range []func() bool{
		func() bool { // a listing of d is d's own: f, or nothing
			var l wire.FileList
			code := s.do("GET", base+"d?list&all=1", nil, &l)
			check("listing "+strings.Join(names(l), ","), code != 200 || len(l.Entries) <= 1 && (len(l.Entries) == 0 || l.Entries[0].Name == "f"))
			return code == 200
		},
		func() bool {
			code, b := s.fetchAll(base + "d/etc/passwd")
			check("d/etc/passwd: "+string(b), code != 200)
			return false
		},
		func() bool {
			code, b := s.fetchAll(base + "d/f")
			check("d/f: "+string(b), code != 200 || string(b) == "x\n")
			return code == 200
		},
		func() bool {
			code, b := s.fetchAll("/v1/jobs/" + id + "/artifacts.zip")
			if code != 200 {
				return false
			}
			zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
			check("a zip that does not read", err == nil)
			if err == nil {
				for _, f := range zr.File {
					check("zip entry "+f.Name, !strings.HasPrefix(f.Name, "d/") || f.Name == "d/f" || f.Name == "d/")
				}
			}
			return true
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if probe() {
					mu.Lock()
					counts[i]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(served) > 0 {
		t.Fatalf("served from outside the workspace: %q", served[:min(len(served), 5)])
	}
	if s.job(id).Status != "running" {
		t.Fatalf("the job ended before the probes did: %+v", s.job(id))
	}
	t.Logf("while the sandbox swapped d: %d listings of d, %d reads of d/f, %d zips", counts[0], counts[2], counts[3])
	s.do("POST", "/v1/jobs/"+id+"/cancel", nil, nil)
}

package jobs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/jobs"
)

// TestMediaSave: PNG and JPEG are kept under numbered names, up to the
// size and count limits; anything else is skipped; names Save does not
// make are never opened.
func TestMediaSave(t *testing.T) {
	m := &jobs.Media{Dir: t.TempDir(), MaxBytes: 64, MaxPerJob: 3}
	pngData := []byte("\x89PNG\r\n\x1a\nrest")
	jpgData := []byte("\xff\xd8\xff\xe0rest")
	for _, c := range []struct {
		what string
		step int
		data []byte
		want string
	}{
		{"a PNG", 2, pngData, "2-1.png"},
		{"text", 2, []byte("<html><script>alert(1)</script>"), ""},
		{"an SVG", 2, []byte("<svg xmlns='http://www.w3.org/2000/svg'/>"), ""},
		{"a JPEG", 5, jpgData, "5-2.jpg"},
		{"too large", 5, append(pngData, bytes.Repeat([]byte{0}, 64)...), ""},
		{"the third", 6, pngData, "6-3.png"},
		{"past the job's limit", 7, pngData, ""},
	} {
		name, err := m.Save("job_a", c.step, c.data)
		if err != nil || name != c.want {
			t.Errorf("%s: Save = %q, %v; want %q", c.what, name, err, c.want)
		}
	}
	if name, err := m.Save("job_b", 1, pngData); name != "1-1.png" || err != nil {
		t.Errorf("another job: Save = %q, %v; want 1-1.png", name, err)
	}
	f, kind, err := m.Open("job_a", "5-2.jpg")
	if err != nil || kind != "image/jpeg" {
		t.Fatalf("Open 5-2.jpg = %q, %v", kind, err)
	}
	f.Close()
	for _, name := range []string{"../job_b/1-1.png", "2-1.png/", "2-1.PNG", ".tmp-1"} {
		if _, _, err := m.Open("job_a", name); !errors.Is(err, jobs.ErrBadMediaName) {
			t.Errorf("Open %q: %v, want ErrBadMediaName", name, err)
		}
	}
	if _, _, err := m.Open("job_a", "9-9.png"); !errors.Is(err, jobs.ErrNoMedia) {
		t.Errorf("Open of a missing image: %v, want ErrNoMedia", err)
	}
	if _, err := m.Save("../x", 1, pngData); err == nil {
		t.Errorf("Save under job id ../x succeeded")
	}
	if err := m.Remove("job_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Dir + "/job_a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove left %v", err)
	}
}

// TestMediaShared: an image a worker keeps is served by another host
// sharing the blob store (an API replica), checked against its digest
// and kind; one the store holds wrong is refused, not served.
func TestMediaShared(t *testing.T) {
	b, err := dirblobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	worker := &jobs.Media{Dir: t.TempDir(), Blobs: b}
	replica := &jobs.Media{Dir: t.TempDir(), Blobs: b}
	png := []byte("\x89PNG\r\n\x1a\nscreenshot")
	name, err := worker.Save("job_a", 3, png)
	if err != nil || name != "3-1.png" {
		t.Fatalf("Save = %q, %v", name, err)
	}
	f, kind, err := replica.Open("job_a", name)
	if err != nil || kind != "image/png" {
		t.Fatalf("Open on the replica = %q, %v", kind, err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, png) {
		t.Errorf("the replica served %q", got)
	}
	if _, _, err := replica.Open("job_a", "4-2.png"); !errors.Is(err, jobs.ErrNoMedia) {
		t.Errorf("an image no host kept: %v, want ErrNoMedia", err)
	}
	// A ref naming a blob that is not that image (text put as a PNG).
	html := []byte("<script>alert(1)</script>")
	if err := b.Put(t.Context(), "job_a", blobs.Digest(html), int64(len(html)), bytes.NewReader(html)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRef(t.Context(), "job_a", "media-5-2.png", []byte(blobs.Digest(html))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replica.Open("job_a", "5-2.png"); !errors.Is(err, blobs.ErrCorrupt) {
		t.Errorf("an image whose blob is not a PNG: %v, want ErrCorrupt", err)
	}
}

// TestMediaSharedHostile: a replica serves only names Media makes; a ref
// naming a blob over the size limit, no digest, or a JPEG as a PNG is
// refused, and leaves nothing in the replica's cache.
func TestMediaSharedHostile(t *testing.T) {
	b, err := dirblobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	replica := &jobs.Media{Dir: t.TempDir(), Blobs: b, MaxBytes: 64}
	put := func(ref string, data []byte) {
		t.Helper()
		d := blobs.Digest(data)
		if err := b.Put(t.Context(), "job_a", d, int64(len(data)), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := b.SetRef(t.Context(), "job_a", ref, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	put("media-1-1.png", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 1<<20)...))
	put("media-1-2.png", []byte("\xff\xd8\xffa jpeg"))
	if err := b.SetRef(t.Context(), "job_a", "media-1-3.png", []byte("../../etc/passwd")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"1-1.png", "1-2.png", "1-3.png"} {
		if f, _, err := replica.Open("job_a", name); err == nil {
			f.Close()
			t.Errorf("image %s served", name)
		}
	}
	put("media-x", []byte("\x89PNG\r\n\x1a\n"))
	for _, name := range []string{"x", "media-x", "../1-1.png", "1-1.png/..", "1-1.gif", "01234567890-1.png"} {
		if _, _, err := replica.Open("job_a", name); !errors.Is(err, jobs.ErrBadMediaName) {
			t.Errorf("name %q: %v, want ErrBadMediaName", name, err)
		}
	}
	var left []string
	_ = filepath.WalkDir(replica.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("left in the replica's cache: %v", left)
	}
}

package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/store"
)

// Limits of the images kept for jobs' timelines.
const (
	DefaultMaxMediaBytes  = 4 << 20
	DefaultMaxMediaPerJob = 500
)

// mediaName is the form of a kept image's name: <step>-<n>.<png|jpg>,
// n counting the job's images from 1. Nothing else is ever served.
var mediaName = regexp.MustCompile(`^[0-9]{1,9}-[0-9]{1,9}\.(png|jpg)$`)

// Errors of Media.Open.
var (
	// ErrBadMediaName means a media name is not one Media makes.
	ErrBadMediaName = errors.New("bad media name")
	// ErrNoMedia means a job has no image of that name.
	ErrNoMedia = errors.New("no such image")
)

// Media keeps the images of jobs' tool results (the computer tool's
// screenshots) on the host, for the jobs' timelines: job id's are in
// <Dir>/<id>/, outside every workspace and anywhere a sandbox can write.
// Only PNG and JPEG images (by their first bytes) of at most MaxBytes are
// kept, at most MaxPerJob a job; the rest are skipped (a tool_result
// event counts its images, Images, and names those kept, Media).
type Media struct {
	Dir       string
	MaxBytes  int64 // 0: DefaultMaxMediaBytes
	MaxPerJob int   // 0: DefaultMaxMediaPerJob
	// Blobs, if set, is the blob store the cluster shares: each image is
	// kept there too (in the job's namespace, under the ref
	// "media-<name>"), so that every API replica serves the images of
	// jobs other hosts ran, and Dir is this host's cache of them.
	Blobs blobs.Store

	mu sync.Mutex // one Save at a time picks the next number
}

// NewMedia returns the media kept in <dataDir>/media.
func NewMedia(dataDir string) *Media {
	return &Media{Dir: filepath.Join(dataDir, "media")}
}

// Save keeps one image of job id's step and returns its name, or "" when
// it is not kept: not a PNG or JPEG, too large, or the job has as many as
// it may keep. An error means the host could not write it.
func (m *Media) Save(id string, step int, data []byte) (string, error) {
	ext := imageExt(data)
	if ext == "" || int64(len(data)) > m.maxBytes() || step < 0 {
		return "", nil
	}
	dir, err := m.jobDir(id)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("keep image: %w", err)
	}
	n, err := countMedia(dir)
	if err != nil || n >= m.maxPerJob() {
		return "", err
	}
	name := fmt.Sprintf("%d-%d.%s", step, n+1, ext)
	if err := writeNew(filepath.Join(dir, name), data); err != nil {
		return "", fmt.Errorf("keep image: %w", err)
	}
	if err := m.share(id, name, data); err != nil {
		return "", err
	}
	return name, nil
}

// share puts image name of job id in the shared blob store, if any.
func (m *Media) share(id, name string, data []byte) error {
	if m.Blobs == nil {
		return nil
	}
	ctx := context.Background()
	d := blobs.Digest(data)
	err := m.Blobs.Put(ctx, id, d, int64(len(data)), bytes.NewReader(data))
	if err == nil {
		err = m.Blobs.SetRef(ctx, id, "media-"+name, []byte(d))
	}
	if err != nil {
		return fmt.Errorf("keep image in the blob store: %w", err)
	}
	return nil
}

// fetch copies image name of job id from the shared blob store into this
// host's cache, checking it is the image its ref names; ErrNoMedia when
// there is none.
func (m *Media) fetch(dir, id, name string) error {
	ctx := context.Background()
	ref, err := m.Blobs.Ref(ctx, id, "media-"+name)
	if errors.Is(err, blobs.ErrNotFound) {
		return fmt.Errorf("%w: job %s has no image %s", ErrNoMedia, id, name)
	}
	if err != nil {
		return fmt.Errorf("open image: %w", err)
	}
	digest := string(ref)
	r, size, err := m.Blobs.Open(ctx, id, digest)
	if err != nil {
		return fmt.Errorf("open image: %w", err)
	}
	defer r.Close()
	if size > m.maxBytes() {
		return fmt.Errorf("open image: %d bytes, over %d", size, m.maxBytes())
	}
	data, err := io.ReadAll(io.LimitReader(r, m.maxBytes()+1))
	if err == nil && (blobs.Digest(data) != digest || imageExt(data) != path.Ext(name)[1:]) {
		err = fmt.Errorf("%w: image %s of job %s", blobs.ErrCorrupt, name, id)
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		err = writeNew(filepath.Join(dir, name), data)
	}
	if err != nil {
		return fmt.Errorf("open image: %w", err)
	}
	return nil
}

// Open opens image name of job id and returns it with its Content-Type.
// A name Media would not make is ErrBadMediaName; a missing image is
// ErrNoMedia.
func (m *Media) Open(id, name string) (*os.File, string, error) {
	if !mediaName.MatchString(name) {
		return nil, "", fmt.Errorf("%w %q: want <step>-<n>.png or .jpg", ErrBadMediaName, name)
	}
	dir, err := m.jobDir(id)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) && m.Blobs != nil {
		if err := m.fetch(dir, id, name); err != nil {
			return nil, "", err
		}
		f, err = os.Open(filepath.Join(dir, name))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: job %s has no image %s", ErrNoMedia, id, name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open image: %w", err)
	}
	kind := "image/png"
	if strings.HasSuffix(name, ".jpg") {
		kind = "image/jpeg"
	}
	return f, kind, nil
}

// Remove removes job id's images.
func (m *Media) Remove(id string) error {
	dir, err := m.jobDir(id)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove images: %w", err)
	}
	return nil
}

func (m *Media) jobDir(id string) (string, error) {
	if id == "" || !filepath.IsLocal(id) || strings.ContainsAny(id, `/\`) {
		return "", fmt.Errorf("media of job %q: %w", id, store.ErrNotFound)
	}
	return filepath.Join(m.Dir, id), nil
}

func (m *Media) maxBytes() int64 {
	if m.MaxBytes > 0 {
		return m.MaxBytes
	}
	return DefaultMaxMediaBytes
}

func (m *Media) maxPerJob() int {
	if m.MaxPerJob > 0 {
		return m.MaxPerJob
	}
	return DefaultMaxMediaPerJob
}

// imageExt is "png" or "jpg" by data's magic bytes, else "".
func imageExt(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "jpg"
	}
	return ""
}

// countMedia counts the images kept in dir (not a half-written one).
func countMedia(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("keep image: %w", err)
	}
	n := 0
	for _, e := range entries {
		if mediaName.MatchString(e.Name()) {
			n++
		}
	}
	return n, nil
}

// writeNew writes data to a temporary file beside path and renames it
// there, so a reader never sees half an image.
func writeNew(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// Media opens image name of job id for its timeline (also while the job
// runs): the file and its Content-Type. A job whose data was deleted is
// ErrDeleted; a service without media, or a missing image, ErrNoMedia.
func (s *Service) Media(ctx context.Context, id, name string) (*os.File, string, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if !j.DeletedAt.IsZero() {
		return nil, "", fmt.Errorf("%w: the data of job %s was removed at %s", ErrDeleted, id, j.DeletedAt.UTC().Format(time.RFC3339))
	}
	if s.media == nil {
		return nil, "", fmt.Errorf("%w: job %s has no image %s", ErrNoMedia, id, name)
	}
	return s.media.Open(id, name)
}

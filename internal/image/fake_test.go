package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeEngine is a hand-written Engine: images are a map, a build "creates"
// the tagged image with the requested labels unless buildStream says
// otherwise, an import reads its whole source like the real engine.
type fakeEngine struct {
	mu          sync.Mutex
	images      map[string]map[string]string // ref -> labels
	buildStream string                       // JSON messages; default: a success
	builds      []build.ImageBuildOptions
	contexts    []map[string]string // name -> content of each build context
	imports     []fakeImport
	removed     []string
	importFail  error // returned by ImageImport at once, without reading
	wg          sync.WaitGroup
}

type fakeImport struct {
	ref  string
	opts image.ImportOptions
	data []byte
	err  error // the error reading the source ended with
}

var _ Engine = (*fakeEngine)(nil)

func newFake(t *testing.T) *fakeEngine {
	f := &fakeEngine{images: map[string]map[string]string{}}
	t.Cleanup(f.wg.Wait)
	return f
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	labels, ok := f.images[ref]
	if !ok {
		return image.InspectResponse{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	return image.InspectResponse{ID: "sha256:" + ref, Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: labels}}}, nil
}

func (f *fakeEngine) ImageBuild(_ context.Context, r io.Reader, opts build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	files, err := readTar(r)
	if err != nil {
		return build.ImageBuildResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, opts)
	f.contexts = append(f.contexts, files)
	stream := f.buildStream
	if stream == "" {
		stream = `{"stream":"Step 1/2 : FROM x\n"}` + "\n" + `{"aux":{"ID":"sha256:built"}}` + "\n"
		for _, tag := range opts.Tags {
			f.images[tag] = opts.Labels
		}
	}
	return build.ImageBuildResponse{Body: io.NopCloser(strings.NewReader(stream))}, nil
}

// ImageImport reads the source in its own goroutine, like an HTTP upload,
// and gives up when ctx is done, like the real client.
func (f *fakeEngine) ImageImport(ctx context.Context, src image.ImportSource, ref string, opts image.ImportOptions) (io.ReadCloser, error) {
	if f.importFail != nil {
		return nil, f.importFail
	}
	done := make(chan fakeImport, 1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		data, err := io.ReadAll(src.Source)
		done <- fakeImport{ref: ref, opts: opts, data: data, err: err}
	}()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("import: %w", ctx.Err())
	case imp := <-done:
		f.mu.Lock()
		defer f.mu.Unlock()
		f.imports = append(f.imports, imp)
		if imp.err != nil {
			return nil, fmt.Errorf("upload: %w", imp.err)
		}
		f.images[ref] = nil
		return io.NopCloser(strings.NewReader(`{"status":"sha256:imported"}` + "\n")), nil
	}
}

func (f *fakeEngine) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, ref)
	delete(f.images, ref)
	return nil, nil
}

func readTar(r io.Reader) (map[string]string, error) {
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, tr); err != nil {
			return nil, err
		}
		files[hdr.Name] = b.String()
	}
}

// signalWriter collects output and closes seen once it contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

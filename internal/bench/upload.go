package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/tarpack"
	"github.com/agentbox/agentbox/internal/wire"
)

// UploadOptions say what the upload benchmark measures with.
type UploadOptions struct {
	// URL and Token reach a server whose worker runs tasks as shell
	// scripts (wiring.OpenBenchServer).
	URL, Token string
	Image      string
	Docker     string // the docker CLI for the baselines, default "docker"
	Samples    int    // uploads of each kind (default 5), after one warm-up
	Files      int    // files of the project (default 5,000)
	Bytes      int64  // bytes of the project (default 50 MB)
	Log        io.Writer
}

func (o UploadOptions) withDefaults() UploadOptions {
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if o.Samples <= 0 {
		o.Samples = 5
	}
	if o.Files <= 0 {
		o.Files = 5000
	}
	if o.Bytes <= 0 {
		o.Bytes = 50e6
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// countTask is the job each upload starts: its first (and only) tool
// call counts the files it was given.
const countTask = "find /workspace -type f | wc -l"

// Upload measures a job started from a generated project of o.Files files
// and o.Bytes bytes, mostly incompressible: from the submit (packing,
// sending, unpacking) to the job's first tool call, and to the 201;
// against docker cp of the same tree into a running container, and into
// one started for it. The three are taken in turn, sample after sample,
// so that a busy machine weighs on each alike.
func Upload(ctx context.Context, o UploadOptions) ([]Row, error) {
	o = o.withDefaults()
	dir, err := os.MkdirTemp("", "abupload")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := makeProject(dir, o.Files, o.Bytes); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "upload of a %s, %d-file project: %d times each, after a warm-up\n", units.HumanSize(float64(o.Bytes)), o.Files, o.Samples)
	s, err := newUploadSampler(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer s.close()
	var first, created, cp, runCp []time.Duration
	for i := range o.Samples + 1 {
		f, c, err := s.upload(ctx)
		if err != nil {
			return nil, err
		}
		d, err := s.cp(ctx)
		if err != nil {
			return nil, err
		}
		r, err := s.runCp(ctx)
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first is the warm-up
			first, created, cp, runCp = append(first, f), append(created, c), append(cp, d), append(runCp, r)
		}
	}
	name := fmt.Sprintf("%s, %d-file project", units.HumanSize(float64(o.Bytes)), o.Files)
	return []Row{
		{Name: name + ": submit → 201 (packed, sent, unpacked)", Baseline: "docker cp DIR CONTAINER:/workspace (running)", Ours: summarize(created), Base: summarize(cp)},
		{Name: name + ": submit → first tool call", Baseline: "docker cp DIR CONTAINER:/workspace (running)", Ours: summarize(first), Base: summarize(cp)},
		{Name: name + ": submit → first tool call", Baseline: "docker run -d IMAGE; docker cp DIR CONTAINER:/workspace", Ours: summarize(first), Base: summarize(runCp)},
	}, nil
}

// uploadSampler takes one sample of each kind at a time.
type uploadSampler struct {
	o       UploadOptions
	dir     string
	c       *client.Client
	root    *os.Root // over dir
	running string   // a container of the image, for docker cp
	cleanup func()
}

func newUploadSampler(ctx context.Context, o UploadOptions, dir string) (*uploadSampler, error) {
	c, err := client.New(o.URL, o.Token)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	ref, cleanup, err := plainContainer(ctx, Options{Docker: o.Docker, Image: o.Image}, "")
	if err != nil {
		root.Close()
		return nil, err
	}
	return &uploadSampler{o: o, dir: dir, c: c, root: root, running: ref, cleanup: cleanup}, nil
}

func (s *uploadSampler) close() {
	s.cleanup()
	s.root.Close()
}

// upload submits one job starting from the project, follows it to its
// end, checks that its tool saw every file, and removes its data.
func (s *uploadSampler) upload(ctx context.Context) (toFirst, toCreated time.Duration, err error) {
	begin := time.Now()
	sr, err := s.c.SubmitDir(ctx, wire.SubmitRequest{Task: countTask}, "", s.root, tarpack.PackOptions{})
	if err != nil {
		return 0, 0, err
	}
	toCreated = time.Since(begin)
	var called time.Time
	var out strings.Builder
	err = s.c.Follow(ctx, sr.JobID, 0, func(ev wire.Event) error {
		switch ev.Type {
		case event.TypeCommand:
			called = ev.Time
		case event.TypeOutput:
			if p, ok := event.As[event.Output](ev.Type, ev.Payload); ok {
				out.WriteString(p.Text)
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if got := strings.TrimSpace(out.String()); got != fmt.Sprint(s.o.Files) || called.IsZero() {
		return 0, 0, fmt.Errorf("job %s: its tool counted %q files, want %d", sr.JobID, got, s.o.Files)
	}
	_, err = s.c.Delete(ctx, sr.JobID)
	return called.Sub(begin), toCreated, err
}

// cp times docker cp of the project into the running container.
func (s *uploadSampler) cp(ctx context.Context) (time.Duration, error) {
	begin := time.Now()
	if err := run(ctx, s.o.Docker, "cp", s.dir, s.running+":/workspace/proj"); err != nil {
		return 0, err
	}
	took := time.Since(begin)
	return took, run(ctx, s.o.Docker, "exec", "-u", "0", s.running, "rm", "-rf", "/workspace/proj")
}

// runCp times starting a container of the image and docker cp of the
// project into it.
func (s *uploadSampler) runCp(ctx context.Context) (time.Duration, error) {
	begin := time.Now()
	out, err := exec.CommandContext(ctx, s.o.Docker, "run", "-d", "--network", "none", s.o.Image, "sleep", "3600").Output()
	if err != nil {
		return 0, fmt.Errorf("docker run: %w", err)
	}
	ref := strings.TrimSpace(string(out))
	err = run(ctx, s.o.Docker, "cp", s.dir, ref+":/tmp/proj")
	took := time.Since(begin)
	return took, errors.Join(err, run(context.WithoutCancel(ctx), s.o.Docker, "rm", "-f", ref))
}

// makeProject writes a project of n files and about size bytes into dir:
// sizes spread as in a source tree with some data (many small files, a
// few of megabytes), in a hundred directories; four files in five are
// random bytes, which no compressor shrinks, the rest source-like text.
// The same arguments make the same project.
func makeProject(dir string, n int, size int64) error {
	rng := rand.New(rand.NewPCG(12, 2026))
	sizes := projectSizes(rng, n, size)
	src := rand.NewChaCha8([32]byte{12})
	text := []byte(strings.Repeat("def handler(request):\n    return {'status': 'ok'}\n", 1+int(slices.Max(sizes)/48)))
	for i, sz := range sizes {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%10), fmt.Sprintf("mod%02d", i/10%10), fmt.Sprintf("f%04d.dat", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		data := text[:sz]
		if i%5 != 0 {
			data = make([]byte, sz)
			src.Read(data)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// projectSizes draws n log-normal sizes (median ~4 KiB, at most 4 MiB)
// and scales them to add up to size.
func projectSizes(rng *rand.Rand, n int, size int64) []int64 {
	raw := make([]float64, n)
	var sum float64
	for i := range raw {
		raw[i] = math.Min(math.Exp(8.3+1.6*rng.NormFloat64()), 4<<20)
		sum += raw[i]
	}
	sizes := make([]int64, n)
	var total int64
	for i, r := range raw {
		sizes[i] = max(1, int64(r*float64(size)/sum))
		total += sizes[i]
	}
	sizes[0] += max(0, size-total) // rounding
	return sizes
}

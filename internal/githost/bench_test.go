package githost_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
)

// sourceWords are what sourceText is made of.
var sourceWords = strings.Fields("func return if err nil else for range package import type struct string int byte error context fmt the a of to")

// sourceText is size bytes or so of text that compresses about as source
// does: words, and a number ending a line now and then.
func sourceText(rng *rand.Rand, size int) string {
	var sb strings.Builder
	for sb.Len() < size {
		sb.WriteString(sourceWords[rng.IntN(len(sourceWords))])
		if rng.IntN(8) == 0 {
			sb.WriteString(fmt.Sprintf(" %d\n", rng.Int64()))
		} else {
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

// benchRepo makes a bare repository of files files of size bytes each
// (text that compresses about as source does), in dir, and returns it.
func benchRepo(b *testing.B, dir string, files, size int) string {
	b.Helper()
	work := filepath.Join(dir, "work")
	gittest.Git(b, dir, "init", "--quiet", "--initial-branch=main", work)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range files {
		text := sourceText(rng, size)
		p := filepath.Join(work, fmt.Sprintf("pkg%02d/sub%02d/file%04d.go", i%50, i%7, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text[:size]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gittest.Git(b, work, "add", "-A")
	gittest.Git(b, work, "commit", "--quiet", "-m", "a big repository")
	bare := filepath.Join(dir, "repos", "big.git")
	gittest.Git(b, dir, "clone", "--quiet", "--bare", "--no-local", work, bare)
	gittest.Git(b, bare, "repack", "-a", "-d", "-q") // packed, as a served repository is
	return bare
}

// BenchmarkClone clones a repository of 5,000 files and 50 MB through
// agentbox's path (Host.Clone: a bare clone with the host's credentials,
// then a workspace checkout with a .git of its own, objects copied)
// against a plain `git clone` of the same URL, alternately in the same
// run, over file:// and over the loopback smart-HTTP server.
//
//	go test -run x -bench Clone -benchtime 5x ./internal/githost/
func BenchmarkClone(b *testing.B) {
	dir := b.TempDir()
	bare := benchRepo(b, dir, 5000, 10_000)
	web := gittest.StartHTTP(b, config.Default().Git.TokenUser, "")
	if err := os.Rename(bare, web.Path("big.git")); err != nil {
		b.Fatal(err)
	}
	bare = web.Path("big.git")
	for _, c := range []struct {
		name, url string
		cfg       githost.Config
		plain     []string
	}{
		{"file", "file://" + bare, githost.Config{AllowLocal: true}, nil},
		{"http", web.URL("big.git"), githost.Config{Token: web.Password},
			[]string{"-c", `credential.helper=!f() { echo username=` + web.User + `; echo password=` + web.Password + `; }; f`}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := githost.New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			var ours, plain time.Duration
			for i := 0; i < b.N; i++ {
				ours += timeIt(b, func(d string) {
					ws := filepath.Join(d, "ws")
					if err := os.Mkdir(ws, 0o755); err != nil {
						b.Fatal(err)
					}
					if _, err := h.Clone(bg, githost.CloneRequest{URL: c.url, Branch: "agentbox/job", GitDir: filepath.Join(d, "job.git"), WorkDir: ws}); err != nil {
						b.Fatal(err)
					}
				})
				plain += timeIt(b, func(d string) {
					cmd := exec.Command("git", append(append([]string{}, c.plain...), "clone", "--quiet", c.url, filepath.Join(d, "ws"))...)
					cmd.Env = gittest.Env()
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("git clone: %v\n%s", err, out)
					}
				})
			}
			n := float64(b.N)
			b.ReportMetric(float64(ours.Milliseconds())/n, "agentbox-ms/op")
			b.ReportMetric(float64(plain.Milliseconds())/n, "git-clone-ms/op")
			b.ReportMetric(float64(ours)/float64(plain), "ratio")
		})
	}
}

// timeIt times f on a fresh directory, removed after (not timed).
func timeIt(b *testing.B, f func(dir string)) time.Duration {
	d, err := os.MkdirTemp("", "clonebench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(d)
	begin := time.Now()
	f(d)
	return time.Since(begin)
}

// BenchmarkDiff5000 is Host.Diff of a normal change: a workspace of 5,000
// files of 10 kB (text as source is) in which every file had one line
// changed, against the snapshot of where it started.
//
//	go test -run x -bench Diff5000 -benchtime 5x ./internal/githost/
func BenchmarkDiff5000(b *testing.B) {
	dir := b.TempDir()
	work := filepath.Join(dir, "work")
	rng := rand.New(rand.NewPCG(1, 2))
	files := make(map[string][]byte)
	for i := range 5000 {
		text := sourceText(rng, 10_000)
		p := filepath.Join(work, fmt.Sprintf("pkg%02d/sub%02d/file%04d.go", i%50, i%7, i))
		files[p] = []byte(text)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, files[p], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	h, err := githost.New(githost.Config{})
	if err != nil {
		b.Fatal(err)
	}
	gitDir := filepath.Join(dir, "job.git")
	base, err := h.Snapshot(bg, gitDir, work)
	if err != nil {
		b.Fatal(err)
	}
	for p, body := range files {
		body = append([]byte("// changed by the job\n"), body...)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var n countWriter
	b.ResetTimer()
	for b.Loop() {
		n = 0
		if err := h.Diff(bg, gitDir, work, base, &n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "diff-bytes")
}

// BenchmarkDiff takes the diff of a workspace cloned from a repository of
// 5,000 files and 50 MB, with 50 files changed, 50 new and ignored build
// output beside them: what GET /diff does for an ordinary repository job.
//
//	go test -run x -bench Diff -benchtime 10x ./internal/githost/
func BenchmarkDiff(b *testing.B) {
	dir := b.TempDir()
	bare := benchRepo(b, dir, 5000, 10_000)
	h, err := githost.New(githost.Config{AllowLocal: true})
	if err != nil {
		b.Fatal(err)
	}
	ws, gitDir := filepath.Join(dir, "ws"), filepath.Join(dir, "job.git")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	base, err := h.Clone(bg, githost.CloneRequest{URL: "file://" + bare, Branch: "agentbox/job", GitDir: gitDir, WorkDir: ws})
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{".gitignore": "*.o\nbuild/\n"}
	for i := range 50 {
		files[fmt.Sprintf("pkg%02d/sub%02d/file%04d.go", i%50, i%7, i)] = fmt.Sprintf("changed %d\n", i)
		files[fmt.Sprintf("pkg%02d/new%02d.go", i%50, i)] = fmt.Sprintf("new %d\n", i)
		files[fmt.Sprintf("pkg%02d/obj%02d.o", i%50, i)] = "object\n"
		files[fmt.Sprintf("build/out%02d", i)] = "output\n"
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var n int64
	for b.Loop() {
		var w countWriter
		if err := h.Diff(bg, gitDir, ws, base, &w); err != nil {
			b.Fatal(err)
		}
		n = int64(w)
	}
	if n == 0 {
		b.Fatal("empty diff")
	}
	b.ReportMetric(float64(n), "diff-bytes")
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

package wiring

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/blobs/pgblobs"
	"github.com/agentbox/agentbox/internal/pgserver"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/workspace"
)

// CheckpointBenchOptions say what `agentbox bench checkpoint` measures.
type CheckpointBenchOptions struct {
	Files, Rounds int
	// Blobs is the blob store: an absolute path (a directory store), a
	// postgres:// URL (its database, migrated), "postgres" (a durable
	// PostgreSQL server of its own), "": a temporary directory store.
	Blobs         string
	Image, Docker string
	Log           io.Writer
}

// CheckpointBenchResult is what it measured: the first, full checkpoint,
// the incremental ones after a 1-file change, and the plain engine's full
// copy of the same tree out of a container (docker exec … tar).
type CheckpointBenchResult struct {
	Store                string // what the blobs were kept in
	Full                 time.Duration
	FullBytes, FullTrees int64           // bytes of the files, and of the trees, put
	Incremental, Tar     []time.Duration // sorted
	IncrementalUploaded  int64           // bytes, all rounds
	IncrementalUploads   int
	TreeBytes            int64 // of the trees put, all rounds
	TreesUploaded        int
	TarBytes             int64
	Entries, FilesPerDir int
}

// BenchCheckpoint writes a workspace of o.Files small source-like files,
// checkpoints it whole into the blob store o.Blobs names, then o.Rounds
// times changes one file and checkpoints it again; then times docker exec
// tar of the same tree in a container of the sandbox image.
func BenchCheckpoint(ctx context.Context, o CheckpointBenchOptions) (CheckpointBenchResult, error) {
	var r CheckpointBenchResult
	tmp, err := os.MkdirTemp("", "agentbox-benchckpt-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	var c closers
	defer c.Close()
	b, err := benchBlobs(ctx, o.Blobs, tmp, &c, &r.Store)
	if err != nil {
		return r, err
	}
	ws := filepath.Join(tmp, "ws")
	if err := fillSource(ws, o.Files); err != nil {
		return r, err
	}
	shared := workspace.NewShared(b, filepath.Join(tmp, "cache"))
	id := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	defer b.Remove(context.WithoutCancel(ctx), id)
	if err := r.checkpoints(ctx, shared, id, ws, o); err != nil {
		return r, err
	}
	fmt.Fprintf(o.Log, "docker exec tar of the same tree: %d times\n", o.Rounds)
	r.Tar, r.TarBytes, err = dockerTar(ctx, o, ws)
	return r, err
}

// checkpoints times the full checkpoint and the rounds.
func (r *CheckpointBenchResult) checkpoints(ctx context.Context, s *workspace.Shared, id, ws string, o CheckpointBenchOptions) error {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	fmt.Fprintf(o.Log, "full checkpoint of %d files, then %d of a 1-file change\n", o.Files, o.Rounds)
	snap, st, err := s.Save(ctx, id, workspace.TreeWorkspace, root, nil, workspace.Checkpoint{At: time.Now()})
	if err != nil {
		return err
	}
	r.Full, r.FullBytes, r.FullTrees, r.Entries = st.Took, st.UploadedBytes, st.TreeBytes, st.Entries
	for i := range o.Rounds {
		p := filepath.Join(ws, fmt.Sprintf("pkg%02d", i%benchDirs), fmt.Sprintf("f%04d.go", i%o.Files))
		if err := os.WriteFile(p, fmt.Appendf(nil, "package pkg\n\n// round %d\nfunc F() int { return %d }\n", i, i), 0o644); err != nil {
			return err
		}
		snap, st, err = s.Save(ctx, id, workspace.TreeWorkspace, root, snap, workspace.Checkpoint{Step: i + 1, At: time.Now()})
		if err != nil {
			return err
		}
		r.Incremental = append(r.Incremental, st.Took)
		r.IncrementalUploaded += st.UploadedBytes
		r.IncrementalUploads += st.Uploaded
		r.TreeBytes += st.TreeBytes
		r.TreesUploaded += st.TreesUploaded
	}
	slices.Sort(r.Incremental)
	return nil
}

// benchBlobs opens the blob store arg names (see
// CheckpointBenchOptions.Blobs), what it made in tmp or closes added to
// c, and names it in name.
func benchBlobs(ctx context.Context, arg, tmp string, c *closers, name *string) (blobs.Store, error) {
	url := arg
	switch {
	case arg == "":
		*name = "a directory store"
		return dirblobs.New(filepath.Join(tmp, "blobs"))
	case arg == "postgres":
		srv, err := pgserver.Start("", "agentbox-benchpg-", pgserver.Options{Durable: true})
		if err != nil {
			return nil, fmt.Errorf("start a PostgreSQL server (or pass --blobs postgres://…): %w", err)
		}
		c.addFunc(srv.Stop)
		if url, err = srv.CreateDatabase(ctx, "bench"); err != nil {
			return nil, err
		}
		*name = "PostgreSQL 15, local, durable"
	case strings.HasPrefix(arg, "postgres://") || strings.HasPrefix(arg, "postgresql://"):
		*name = "PostgreSQL at " + postgres.Redact(arg)
	default:
		*name = "a directory store at " + arg
		return dirblobs.New(arg)
	}
	pg, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return nil, err
	}
	c.add(pg.Close)
	return pgblobs.New(pg.Pool()), nil
}

// benchDirs is how many directories the bench's workspace spreads its
// files over.
const benchDirs = 20

// fillSource writes n files of about 1 KiB of Go source, each different,
// in benchDirs directories of dir.
func fillSource(dir string, n int) error {
	body := strings.Repeat("\t_ = fmt.Sprintf(\"agentbox %d\", x)\n", 28)
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%benchDirs))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		src := fmt.Sprintf("package pkg\n\nimport \"fmt\"\n\n// F%d is file %d.\nfunc F%d(x int) {\n%s}\n", i, i, i, body)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.go", i)), []byte(src), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dockerTar times `docker exec C tar -c -C /workspace .` rounds times
// (after a warm-up) in a container of the image with ws at /workspace.
func dockerTar(ctx context.Context, o CheckpointBenchOptions, ws string) ([]time.Duration, int64, error) {
	out, err := exec.CommandContext(ctx, o.Docker, "run", "-d", "--rm", "--network", "none", "--entrypoint", "sleep",
		"-v", ws+":/workspace:ro", o.Image, "3600").Output()
	if err != nil {
		return nil, 0, fmt.Errorf("docker run: %w", err)
	}
	ref := strings.TrimSpace(string(out))
	defer exec.Command(o.Docker, "rm", "-f", ref).Run()
	var ds []time.Duration
	var n int64
	for i := range o.Rounds + 1 {
		begin := time.Now()
		cmd := exec.CommandContext(ctx, o.Docker, "exec", ref, "tar", "-c", "-C", "/workspace", ".")
		cw := &countWriter{}
		cmd.Stdout = cw
		if err := cmd.Run(); err != nil {
			return nil, 0, fmt.Errorf("docker exec tar: %w", err)
		}
		if i > 0 {
			ds = append(ds, time.Since(begin))
		}
		n = cw.n
	}
	slices.Sort(ds)
	return ds, n, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// CheckpointMarkdown prints r as a table.
func CheckpointMarkdown(w io.Writer, o CheckpointBenchOptions, r CheckpointBenchResult) {
	pct := func(ds []time.Duration, p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	msf := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	inc, tar := pct(r.Incremental, 0.5), pct(r.Tar, 0.5)
	fmt.Fprintf(w, "A workspace of %d files (%d entries), %d rounds of a 1-file change; blobs in %s.\n\n", o.Files, r.Entries, o.Rounds, r.Store)
	fmt.Fprintln(w, "| operation | p50 | p95 | bytes moved |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| first checkpoint (everything) | %s | – | %d (+ %d of trees) |\n", msf(r.Full), r.FullBytes, r.FullTrees)
	fmt.Fprintf(w, "| checkpoint after a 1-file change | %s | %s | %d per round (%d blobs in %d rounds) |\n",
		msf(inc), msf(pct(r.Incremental, 0.95)), r.IncrementalUploaded/int64(len(r.Incremental)), r.IncrementalUploads, len(r.Incremental))
	fmt.Fprintf(w, "| … plus the trees of the directories on its path | – | – | %d per round (%d trees in %d rounds) |\n",
		r.TreeBytes/int64(len(r.Incremental)), r.TreesUploaded, len(r.Incremental))
	fmt.Fprintf(w, "| `docker exec C tar -c -C /workspace .` (a full copy) | %s | %s | %d |\n", msf(tar), msf(pct(r.Tar, 0.95)), r.TarBytes)
	fmt.Fprintf(w, "\nIncremental checkpoint vs the plain engine's full copy (p50): %.1f× faster.\n", float64(tar)/float64(inc))
}

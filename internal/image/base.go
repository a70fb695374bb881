package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
)

// BaseRepo is the repository of bases imported from the Debian archive.
const BaseRepo = "agentbox-base"

// basePath is the PATH of an imported base: a tar stream carries no image
// config, and the Dockerfile's RUN steps need one.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stopGrace is how long mmdebstrap gets after SIGTERM to unmount and remove
// its temporary root before it is killed.
const stopGrace = 20 * time.Second

// mmdebstrapArgs are the arguments that decide the base's contents; the
// base tag is a hash of them. The tar goes to stdout ("-"). The default
// mirror gets Debian's usual three sources (release, updates, security),
// a custom one its release and updates suites.
func mmdebstrapArgs(mirror string) []string {
	mirror = strings.TrimRight(mirror, "/")
	args := []string{
		"--variant=minbase",
		"--include=ca-certificates",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-include=/usr/share/locale/locale.alias",
		"bookworm", "-",
		"deb " + mirror + " bookworm main",
		"deb " + mirror + " bookworm-updates main",
	}
	if mirror == DefaultMirror {
		args = append(args, "deb http://deb.debian.org/debian-security bookworm-security main")
	}
	return args
}

// baseTag names the base that mmdebstrapArgs(mirror) produce.
func baseTag(args []string) string {
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return BaseRepo + ":bookworm-" + hex.EncodeToString(sum[:])[:12]
}

// ensureBase imports a Debian base built by mmdebstrap unless its tag is
// already on the engine (and not opts.Force). It reports whether it built.
func ensureBase(ctx context.Context, cli Engine, opts Options) (string, bool, error) {
	args := mmdebstrapArgs(opts.Mirror)
	tag := baseTag(args)
	if !opts.Force {
		_, err := cli.ImageInspect(ctx, tag)
		if err == nil {
			return tag, false, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return "", false, engineError(cli, fmt.Errorf("inspect base %s: %w", tag, err))
		}
	}
	fmt.Fprintf(opts.Progress, "building base %s: mmdebstrap %s\n", tag, strings.Join(args, " "))
	if err := importBase(ctx, cli, tag, args, opts.Progress); err != nil {
		return "", false, fmt.Errorf("base %s: %w", tag, err)
	}
	return tag, true, nil
}

// importBase streams mmdebstrap's tar straight into the engine's import
// API: no temporary file. A failed or cancelled mmdebstrap fails the
// import, and a failed import stops mmdebstrap.
func importBase(ctx context.Context, cli Engine, tag string, args []string, progress io.Writer) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	stderr := &tailWriter{w: progress}
	cmd := mmdebstrapCmd(runCtx, args, stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mmdebstrap: %w", err)
	}
	src := &exitReader{r: stdout, cmd: cmd}
	importErr := importTar(runCtx, cli, tag, src, progress)
	if importErr != nil {
		stop(importErr)
	}
	waitErr := src.wait()
	killGroup(cmd)
	return importResult(ctx, cli, tag, importErr, src.failed(), waitErr, stderr)
}

// importResult picks the error that explains what went wrong first: the
// caller's cancellation, then mmdebstrap failing on its own, then the import.
func importResult(ctx context.Context, cli Engine, tag string, importErr, ownFailure, waitErr error, stderr *tailWriter) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("mmdebstrap stopped: %w", err)
	}
	if ownFailure != nil {
		return fmt.Errorf("mmdebstrap: %w%s", ownFailure, stderr.lastLines())
	}
	if importErr != nil {
		return importErr
	}
	if waitErr != nil {
		removeImage(cli, tag)
		return fmt.Errorf("mmdebstrap: %w%s", waitErr, stderr.lastLines())
	}
	return nil
}

// mmdebstrapCmd runs mmdebstrap in its own process group, so that a
// terminal's Ctrl-C reaches only agentbox, which then stops it the way a
// terminal would: SIGTERM to the whole group. The workers (apt, dpkg) die,
// and mmdebstrap's main process, which waits for them, unmounts and removes
// its temporary root. Signalling only the main process would make it wait
// for the whole bootstrap to finish first.
func mmdebstrapCmd(ctx context.Context, args []string, progress io.Writer) *exec.Cmd {
	if os.Geteuid() != 0 {
		args = append([]string{"--mode=unshare"}, args...)
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Stderr = progress
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	return cmd
}

// killGroup kills whatever mmdebstrap left running in its process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func importTar(ctx context.Context, cli Engine, tag string, src io.Reader, progress io.Writer) error {
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: src, SourceName: "-"}, tag, image.ImportOptions{
		Message: "agentbox base: mmdebstrap",
		Changes: []string{"ENV PATH=" + basePath, `CMD ["bash"]`},
	})
	if err != nil {
		return engineError(cli, fmt.Errorf("import: %w", err))
	}
	defer rc.Close()
	if _, err := decodeStream(rc, progress); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

func removeImage(cli Engine, ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
}

// exitReader passes a process's stdout through and reports io.EOF only if
// the process then exits successfully; otherwise the read fails, so the
// upload aborts instead of importing a truncated tar. The HTTP client reads
// it from its own goroutine, hence the sync.Once.
type exitReader struct {
	r       io.Reader
	cmd     *exec.Cmd
	once    sync.Once
	waitErr error
	mu      sync.Mutex
	failErr error // set when the process failed at the end of its output
}

func (e *exitReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		if werr := e.wait(); werr != nil {
			e.mu.Lock()
			e.failErr = werr
			e.mu.Unlock()
			return n, fmt.Errorf("mmdebstrap: %w", werr)
		}
	}
	return n, err
}

// wait waits for the process once; every call returns the same result.
func (e *exitReader) wait() error {
	e.once.Do(func() { e.waitErr = e.cmd.Wait() })
	return e.waitErr
}

// failed returns the process's error if it failed on its own, having
// closed its output, rather than being stopped while writing.
func (e *exitReader) failed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failErr
}

// tailWriter passes writes on and keeps the last few KiB for error reports.
type tailWriter struct {
	w    io.Writer
	mu   sync.Mutex
	tail []byte
}

const tailBytes = 4 << 10

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if len(t.tail) > tailBytes {
		t.tail = t.tail[len(t.tail)-tailBytes:]
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// lastLines returns ":\n" and the last lines written, or "" if none.
func (t *tailWriter) lastLines() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.tail)), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return ":\n  " + strings.Join(lines, "\n  ")
}

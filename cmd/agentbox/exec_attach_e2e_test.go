package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// runWith executes the CLI in-process with stdin and stdout as given.
func runWith(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) (stderr string, err error) {
	root := newRootCmd()
	var e bytes.Buffer
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(&e)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return e.String(), err
}

// TestExecPipesStdinByteExact: `exec -i cat` gives back 3 MB of random
// bytes exactly, on every tier this machine runs.
func TestExecPipesStdinByteExact(t *testing.T) {
	in := make([]byte, 3<<20)
	rand.Read(in)
	for _, tier := range []string{"container", "gvisor", "microvm"} {
		t.Run(tier, func(t *testing.T) {
			needTier(t, tier)
			instance := sandboxEnv(t)
			var out bytes.Buffer
			stderr, err := runWith(context.Background(), bytes.NewReader(in), &out, "exec", "-q", "-i", "--isolation", tier, "cat")
			if err != nil || sha256.Sum256(out.Bytes()) != sha256.Sum256(in) {
				t.Fatalf("err %v, %d bytes back of %d; stderr:\n%s", err, out.Len(), len(in), stderr)
			}
			assertNoSandboxes(t, instance)
		})
	}
}

// TestExecForwardsPipedStdin: with stdin a pipe, exec forwards it without
// -i, its end closes the command's stdin, and the command's exit code is
// exec's; -i=false keeps it out.
func TestExecForwardsPipedStdin(t *testing.T) {
	sandboxEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		fmt.Fprint(w, "one\ntwo\n")
		w.Close()
	}()
	var out bytes.Buffer
	stderr, err := runWith(context.Background(), r, &out, "exec", "-q", "wc -l; exit 4")
	r.Close()
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 4 || strings.TrimSpace(out.String()) != "2" {
		t.Fatalf("err %v, stdout %q, want 2 lines and exit 4; stderr:\n%s", err, out.String(), stderr)
	}
	out.Reset()
	stderr, err = runWith(context.Background(), strings.NewReader("kept out\n"), &out, "exec", "-q", "-i=false", "cat")
	if err != nil || out.Len() != 0 {
		t.Fatalf("-i=false: err %v, stdout %q; stderr:\n%s", err, out.String(), stderr)
	}
}

// TestExecTerminal: `exec -t` in a terminal runs the command on a
// pseudo-terminal of the local window's size, follows a resize, passes
// keys typed, and leaves the local terminal as it found it, on every tier
// this machine runs.
func TestExecTerminal(t *testing.T) {
	for _, tier := range []string{"container", "gvisor", "microvm"} {
		t.Run(tier, func(t *testing.T) {
			needTier(t, tier)
			sandboxEnv(t)
			execInATerminal(t, tier)
		})
	}
}

func execInATerminal(t *testing.T, tier string) {
	dir := t.TempDir()
	script := fmt.Sprintf(`stty -g > %[1]s/before; %[2]s exec -q -t --isolation %[3]s 'tty; until read -t 1 line; do stty size; done; echo "got $line"; exit 6'; rc=$?; stty -g > %[1]s/after; echo "rc=$rc"; sleep 600`, dir, guestBinary, tier)
	tty := testenv.StartTmux(t, 97, 31, nil, "sh", "-c", script)
	screen := tty.WaitFor("the pseudo-terminal's name and size", 120*time.Second, func(s string) bool { return strings.Contains(s, "31 97") })
	if !regexp.MustCompile(`(?m)^/dev/pts/\d+$`).MatchString(screen) {
		t.Fatalf("no /dev/pts path on the screen:\n%s", screen)
	}
	// The command prints its size each second until a line comes: the
	// resize is seen before the keys are typed (they travel apart).
	tty.Resize(120, 40)
	tty.WaitFor("the new size", 60*time.Second, func(s string) bool { return strings.Contains(s, "40 120") })
	tty.Type("hello")
	tty.Keys("Enter")
	screen = tty.WaitFor("the command's end", 60*time.Second, func(s string) bool { return strings.Contains(s, "rc=") })
	if !strings.Contains(screen, "got hello") || !strings.Contains(screen, "rc=6") {
		t.Fatalf("want the line typed and exit 6; the screen:\n%s", screen)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	if len(before) == 0 || !bytes.Equal(before, after) {
		t.Errorf("the terminal was not restored: before %q, after %q", before, after)
	}
}

// TestExecMaxOutputIsASize: a --max-output that is not a size is a
// usage error (exit 2) saying what was expected, before any sandbox.
func TestExecMaxOutputIsASize(t *testing.T) {
	code, stderr := runReport(t, "exec", "--max-output", "lots", "true")
	if code != 2 || !strings.Contains(stderr, "--max-output") || !strings.Contains(stderr, "want a size such as") {
		t.Errorf("exit %d, stderr %q; want 2 and what --max-output takes", code, stderr)
	}
}

// TestExecMaxOutputCuts: past --max-output the command is stopped,
// stdout holds exactly the first bytes, stderr says why (no marker in the
// data) and exec exits 3.
func TestExecMaxOutputCuts(t *testing.T) {
	instance := sandboxEnv(t)
	var out bytes.Buffer
	stderr, err := runWith(context.Background(), strings.NewReader(""), &out, "exec", "-q", "--max-output", "100k", "seq 1 1000000")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitOutputCut {
		t.Fatalf("err = %v, want exit %d; stderr:\n%s", err, exitOutputCut, stderr)
	}
	var want bytes.Buffer
	for i := 1; want.Len() < 100<<10; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()[:100<<10]) {
		t.Errorf("stdout is not the first 100 KiB: %d bytes, ends %q", out.Len(), out.Bytes()[max(0, out.Len()-40):])
	}
	if !strings.Contains(stderr, "agentbox: output cut at 100 KiB (--max-output); rerun with --max-output 0 for all of it") {
		t.Errorf("stderr does not say why:\n%s", stderr)
	}
	assertNoSandboxes(t, instance)
}

// TestExecUnlimitedWhenPiped: to a pipe or a file there is no cap: 50 MB
// come through byte for byte.
func TestExecUnlimitedWhenPiped(t *testing.T) {
	sandboxEnv(t)
	ws := t.TempDir()
	data := make([]byte, 50<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(ws, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	stderr, err := runWith(context.Background(), strings.NewReader(""), h, "exec", "-q", "--workspace", ws, "cat big")
	if err != nil || !bytes.Equal(h.Sum(nil), sum(data)) {
		t.Fatalf("err %v, or the 50 MB differ; stderr:\n%s", err, stderr)
	}
}

func sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// TestExecBackPressure: a command writing forever to a client that reads
// slowly is slowed down, not buffered: the host's heap stays flat while
// `yes` could write gigabytes, and --max-output ends it with exactly the
// bytes asked for.
func TestExecBackPressure(t *testing.T) {
	sandboxEnv(t)
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	out := &slowWriter{h: sha256.New()}
	stderr, err := runWith(context.Background(), strings.NewReader(""), out, "exec", "-q", "--max-output", "24m", "yes")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitOutputCut || out.n != 24<<20 {
		t.Fatalf("err %v, %d bytes; stderr:\n%s", err, out.n, stderr)
	}
	if grew := out.peak.Load() - int64(base.HeapAlloc); grew > 64<<20 {
		t.Errorf("the heap grew by %d MB while the client read slowly", grew>>20)
	}
	t.Logf("%d MiB read in %v; heap at most %+d KiB from before", out.n>>20, out.took, (out.peak.Load()-int64(base.HeapAlloc))>>10)
}

// slowWriter reads at about 8 MB/s, noting the heap's peak as it goes.
type slowWriter struct {
	h     hash.Hash
	n     int64
	start time.Time
	took  time.Duration
	peak  atomic.Int64
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	w.n += int64(len(p))
	time.Sleep(time.Duration(len(p)) * time.Second / (8 << 20))
	if w.n%(1<<20) < int64(len(p)) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.peak.Store(max(w.peak.Load(), int64(m.HeapAlloc)))
	}
	w.took = time.Since(w.start)
	return w.h.Write(p)
}

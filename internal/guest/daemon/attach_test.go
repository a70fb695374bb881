package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

func attach(t *testing.T, c *guest.Client, req guest.AttachRequest, aio guest.AttachIO) guest.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.ExecAttach(ctx, req, aio)
	if err != nil {
		t.Fatalf("attach %q: %v", req.Cmd, err)
	}
	return res
}

// TestAttachPipesStdinByteExact: bytes sent as stdin come back from cat
// unchanged, its end closes cat's stdin, and the exit code is cat's.
func TestAttachPipesStdinByteExact(t *testing.T) {
	c, _ := start(t)
	in := make([]byte, 3<<20)
	rand.Read(in)
	var out, errOut bytes.Buffer
	res := attach(t, c, guest.AttachRequest{ExecRequest: guest.ExecRequest{Cmd: []string{"cat"}}, Interactive: true},
		guest.AttachIO{Stdin: bytes.NewReader(in), Stdout: &out, Stderr: &errOut})
	if res.ExitCode != 0 || sha256.Sum256(out.Bytes()) != sha256.Sum256(in) {
		t.Fatalf("exit %d, %d bytes back of %d, stderr %q", res.ExitCode, out.Len(), len(in), errOut.String())
	}
	if res.StdoutBytes != int64(len(in)) {
		t.Errorf("stdout_bytes = %d", res.StdoutBytes)
	}
	res = attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("echo out; echo err >&2; exit 7")},
		guest.AttachIO{Stdout: &out, Stderr: &errOut})
	if res.ExitCode != 7 || !strings.HasSuffix(errOut.String(), "err\n") {
		t.Errorf("exit %d, stderr %q", res.ExitCode, errOut.String())
	}
}

// TestAttachHasNoOutputCap: output far past the guest's cap for the
// model's tools comes whole, with no marker.
func TestAttachHasNoOutputCap(t *testing.T) {
	c, _ := start(t)
	var n countWriter
	res := attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("head -c 20000000 /dev/zero")},
		guest.AttachIO{Stdout: &n, Stderr: io.Discard})
	if n.n.Load() != 20000000 || res.Truncated || res.ExitCode != 0 {
		t.Errorf("got %d bytes, result %+v", n.n.Load(), res)
	}
}

// TestAttachTerminal: with TTY the command runs on a pseudo-terminal of
// the size asked, and a resize reaches it.
func TestAttachTerminal(t *testing.T) {
	c, _ := start(t)
	var out bytes.Buffer
	res := attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("tty; stty size"), TTY: true,
		Size: guest.WindowSize{Rows: 33, Cols: 101}}, guest.AttachIO{Stdout: &out, Stderr: io.Discard})
	if res.ExitCode != 0 || !regexp.MustCompile(`^/dev/pts/\d+\r\n33 101\r\n$`).MatchString(out.String()) {
		t.Fatalf("exit %d, output %q", res.ExitCode, out.String())
	}
	// A resize reaches the command while it runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resize := make(chan guest.WindowSize)
	sizes := &syncBuf{}
	errc := make(chan error, 1)
	go func() {
		_, err := c.ExecAttach(ctx, guest.AttachRequest{ExecRequest: guest.Shell("while :; do stty size; sleep 0.05; done"), TTY: true,
			Size: guest.WindowSize{Rows: 10, Cols: 20}}, guest.AttachIO{Stdout: sizes, Stderr: io.Discard, Resize: resize})
		errc <- err
	}()
	waitFor(t, func() bool { return strings.Contains(sizes.String(), "10 20\r\n") })
	resize <- guest.WindowSize{Rows: 50, Cols: 150}
	waitFor(t, func() bool { return strings.Contains(sizes.String(), "50 150\r\n") })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want canceled", err)
	}
}

// TestAttachBackPressure: a command writing to a host that does not read
// is held up by the connection, not buffered: while the host stalls,
// head cannot finish its 100 MB; once the host reads, all of it comes.
func TestAttachBackPressure(t *testing.T) {
	c, ws := start(t)
	w := &stallWriter{stall: make(chan struct{}), first: make(chan struct{})}
	errc := make(chan error, 1)
	var res guest.ExecResult
	go func() {
		var err error
		res, err = c.ExecAttach(context.Background(), guest.AttachRequest{ExecRequest: guest.Shell("head -c 100000000 /dev/zero; touch finished")},
			guest.AttachIO{Stdout: w, Stderr: io.Discard})
		errc <- err
	}()
	<-w.first
	// Without back-pressure head writes 100 MB into memory in well under this.
	time.Sleep(time.Second)
	if _, err := os.Stat(filepath.Join(ws, "finished")); err == nil {
		t.Fatal("the command finished writing while the host read one frame: its output was buffered")
	}
	close(w.stall)
	if err := <-errc; err != nil || res.ExitCode != 0 || w.n.Load() != 100000000 {
		t.Fatalf("err %v, exit %d, %d bytes", err, res.ExitCode, w.n.Load())
	}
}

type countWriter struct{ n atomic.Int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// stallWriter closes first on its first write, then blocks until stall is closed.
type stallWriter struct {
	stall, first chan struct{}
	n            atomic.Int64
}

func (w *stallWriter) Write(p []byte) (int, error) {
	if w.n.Add(int64(len(p))) == int64(len(p)) {
		close(w.first)
	}
	<-w.stall
	return len(p), nil
}

// syncBuf is a buffer safe for a writer and a reader at once.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkAttachCat is stdin through cat and back over a unix socket,
// the guest's own cost of `agentbox exec -i cat`.
func BenchmarkAttachCat(b *testing.B) {
	c, _ := start(b)
	data := make([]byte, 64<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var n countWriter
		res, err := c.ExecAttach(context.Background(), guest.AttachRequest{ExecRequest: guest.ExecRequest{Cmd: []string{"cat"}}, Interactive: true},
			guest.AttachIO{Stdin: bytes.NewReader(data), Stdout: &n, Stderr: io.Discard})
		if err != nil || res.ExitCode != 0 || n.n.Load() != int64(len(data)) {
			b.Fatal(err, res, n.n.Load())
		}
	}
}

// TestAttachStartFailure: a command that cannot be found exits 127 with
// the reason on stderr, a name as long as a request allows included.
func TestAttachStartFailure(t *testing.T) {
	c, _ := start(t)
	for _, name := range []string{"no-such-command", strings.Repeat("n", 100<<10)} {
		var errOut bytes.Buffer
		res := attach(t, c, guest.AttachRequest{ExecRequest: guest.ExecRequest{Cmd: []string{name}}}, guest.AttachIO{Stdout: io.Discard, Stderr: &errOut})
		if res.ExitCode != 127 || !strings.Contains(errOut.String(), "cannot run") {
			t.Errorf("exit %d, stderr %.100q", res.ExitCode, errOut.String())
		}
	}
}

// TestAttachStdinBackPressure: endless stdin to a command that does not
// read it is taken only as far as the pipe's and the connection's buffers
// reach, then the host's writes wait; the command's end ends them.
func TestAttachStdinBackPressure(t *testing.T) {
	c, _ := start(t)
	var in endless
	res := attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("sleep 1"), Interactive: true},
		guest.AttachIO{Stdin: &in, Stdout: io.Discard, Stderr: io.Discard})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	if n := in.n.Load(); n > 16<<20 {
		t.Errorf("%d MiB of stdin taken from the host in 1 s by a command that reads none", n>>20)
	}
	t.Logf("stdin taken while the command did not read: %d KiB", in.n.Load()>>10)
}

// endless yields zeros forever, counting them.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// TestAttachSlowHostGetsEverything: a host reading slower than the
// command wrote still gets all it wrote before it ended (the pipe's and
// the pump's bytes are not dropped after a grace), and a background child
// that holds the output open saying nothing does not hold up the end.
func TestAttachSlowHostGetsEverything(t *testing.T) {
	c, _ := start(t)
	w := &rateWriter{perMB: time.Second}
	res := attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("head -c 3000000 /dev/zero")}, guest.AttachIO{Stdout: w, Stderr: io.Discard})
	if w.n != 3000000 || res.Truncated || res.ExitCode != 0 {
		t.Errorf("%d bytes of 1000000, result %+v", w.n, res)
	}
	begin := time.Now()
	var out bytes.Buffer
	res = attach(t, c, guest.AttachRequest{ExecRequest: guest.Shell("sleep 60 & echo hi")}, guest.AttachIO{Stdout: &out, Stderr: io.Discard})
	if took := time.Since(begin); out.String() != "hi\n" || res.Truncated || took > 10*time.Second {
		t.Errorf("output %q, truncated %v, took %v", out.String(), res.Truncated, took)
	}
}

// rateWriter takes bytes at a fixed rate.
type rateWriter struct {
	perMB time.Duration
	n     int
}

func (w *rateWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Duration(len(p)) * w.perMB / 1e6)
	w.n += len(p)
	return len(p), nil
}

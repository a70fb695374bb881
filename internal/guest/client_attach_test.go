package guest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// fakeAttachGuest answers POST /exec/attach with a 101 and then frames.
func fakeAttachGuest(t *testing.T, frames []byte) *guest.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil || req.Header.Get("Upgrade") != guest.AttachUpgrade {
			return
		}
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+guest.AttachUpgrade+"\r\n\r\n")
		conn.Write(frames)
	}()
	return guest.NewClient(sock)
}

// TestAttachRefusesAnOversizedFrame: the guest is not trusted; a frame
// claiming 4 GiB is an error before anything is read or allocated for it.
func TestAttachRefusesAnOversizedFrame(t *testing.T) {
	var b bytes.Buffer
	guest.WriteFrame(&b, guest.FrameStdout, []byte("ok"))
	b.WriteByte(guest.FrameStdout)
	b.Write(binary.BigEndian.AppendUint32(nil, 1<<32-1))
	c := fakeAttachGuest(t, b.Bytes())
	var out bytes.Buffer
	_, err := c.ExecAttach(context.Background(), guest.AttachRequest{ExecRequest: guest.Shell("true")}, guest.AttachIO{Stdout: &out, Stderr: io.Discard})
	if !errors.Is(err, guest.ErrUnavailable) || out.String() != "ok" {
		t.Errorf("err %v, stdout %q; want ErrUnavailable after the first frame", err, out.String())
	}
}

// TestAttachEndsWithoutExitIsAnError: a connection that ends before the
// exit frame is the guest gone, not a command that exited 0.
func TestAttachEndsWithoutExitIsAnError(t *testing.T) {
	var b bytes.Buffer
	guest.WriteFrame(&b, guest.FrameStderr, []byte("partial"))
	c := fakeAttachGuest(t, b.Bytes())
	_, err := c.ExecAttach(context.Background(), guest.AttachRequest{ExecRequest: guest.Shell("true")}, guest.AttachIO{Stdout: io.Discard, Stderr: io.Discard})
	if !errors.Is(err, guest.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}

// TestAttachReturnsOnExitFromAGuestThatStoppedReading: a guest that sends
// its exit frame but never reads what the host writes (a resize, stdin)
// and keeps the connection open must not hold the CLI (its terminal raw,
// Ctrl-C a byte) until --timeout: the exit frame ends the command.
func TestAttachReturnsOnExitFromAGuestThatStoppedReading(t *testing.T) {
	exitNow := make(chan struct{})
	dial := func(ctx context.Context) (net.Conn, error) {
		host, g := net.Pipe() // unbuffered: a write waits for the guest to read
		go func() {
			defer g.Close()
			br := bufio.NewReader(g)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(g, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+guest.AttachUpgrade+"\r\n\r\n")
			<-exitNow
			guest.WriteFrame(g, guest.FrameExit, []byte(`{"exit_code":7}`))
			<-ctx.Done() // keeps the connection open and reads nothing more
		}()
		return host, nil
	}
	c := guest.New(dial, "")
	sizes := make(chan guest.WindowSize)
	type result struct {
		res guest.ExecResult
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := guest.AttachRequest{ExecRequest: guest.Shell("true"), TTY: true}
	req.TimeoutMS = 3600_000
	go func() {
		res, err := c.ExecAttach(ctx, req, guest.AttachIO{Stdout: io.Discard, Stderr: io.Discard, Resize: sizes})
		got <- result{res, err}
	}()
	sizes <- guest.WindowSize{Rows: 24, Cols: 80} // taken: its write now waits on the guest
	close(exitNow)
	select {
	case r := <-got:
		if r.err != nil || r.res.ExitCode != 7 {
			t.Errorf("ExecAttach = %+v, %v; want exit 7", r.res, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ExecAttach still waiting on a resize the guest never reads, 10s after its exit frame")
	}
}

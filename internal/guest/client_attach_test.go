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

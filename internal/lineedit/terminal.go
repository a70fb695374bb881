//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package lineedit

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

const (
	pasteOn  = "\x1b[?2004h"
	pasteOff = "\x1b[?2004l"
)

// OpenTerminal puts the terminal in (our) raw mode — ICANON, ECHO, ISIG,
// IEXTEN, IXON, ICRNL off, OPOST/ONLCR KEPT ON so the rest of the program's
// "\n" output still returns the carriage — turns bracketed paste on
// (ESC[?2004h) and returns New(in, out, cfg) with Width from the terminal.
// Close undoes both. in and out must be terminals.
func OpenTerminal(in, out *os.File, cfg Config) (*Editor, error) {
	inFd, err := fileFd(in)
	if err != nil {
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	outFd, err := fileFd(out)
	if err != nil {
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	saved, err := makeRaw(inFd)
	if err != nil {
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	r, err := newPollReader(inFd)
	if err != nil {
		_ = term.Restore(inFd, saved)
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	cfg.Width = func() int {
		w, _, err := term.GetSize(outFd)
		if err != nil {
			return 0
		}
		return w
	}
	cfg.Height = func() int {
		_, h, err := term.GetSize(outFd)
		if err != nil {
			return 0
		}
		return h
	}
	e, err := New(r, out, cfg)
	if err != nil {
		r.close()
		_ = r.wake.Close()
		_ = term.Restore(inFd, saved)
		return nil, err
	}
	_, _ = io.WriteString(out, pasteOn)
	e.restore = func() error {
		r.close()
		<-e.done // the reader stops before the terminal is given back
		_ = r.wake.Close()
		_, _ = io.WriteString(out, pasteOff)
		if err := term.Restore(inFd, saved); err != nil {
			return fmt.Errorf("restore terminal: %w", err)
		}
		return nil
	}
	return e, nil
}

// fileFd is f's descriptor, got without File.Fd, which would make a
// non-blocking file blocking.
func fileFd(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return 0, err
	}
	return fd, nil
}

// makeRaw sets our raw mode on fd and returns the state to restore.
func makeRaw(fd int) (*term.State, error) {
	saved, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Oflag |= unix.OPOST | unix.ONLCR
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, t); err != nil {
		return nil, err
	}
	return saved, nil
}

// pollReader reads a terminal until close: it waits in poll on the
// terminal and a pipe that close writes to, so the reading goroutine ends
// without a key being typed and without changing the descriptor's flags.
type pollReader struct {
	fd         int
	wake, stop *os.File
	wakeFd     int
}

func newPollReader(fd int) (*pollReader, error) {
	wake, stop, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	wakeFd, err := fileFd(wake)
	if err != nil {
		wake.Close()
		stop.Close()
		return nil, err
	}
	return &pollReader{fd: fd, wake: wake, stop: stop, wakeFd: wakeFd}, nil
}

// Read waits for the terminal or close, whichever first.
func (p *pollReader) Read(b []byte) (int, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}, {Fd: int32(p.wakeFd), Events: unix.POLLIN}}
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("poll terminal: %w", err)
		}
		if fds[1].Revents != 0 {
			return 0, errClosed
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(p.fd, b)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// close wakes and ends Read. The wake pipe stays open until then: the
// reader may still be polling it.
func (p *pollReader) close() {
	_ = p.stop.Close()
}

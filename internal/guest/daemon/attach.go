package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/proc"
)

// attachSwitching is the guest's answer to an exec attach it accepts.
const attachSwitching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + guest.AttachUpgrade + "\r\n\r\n"

// execAttach serves POST /exec/attach: it runs one command with its
// stdin, output and terminal on the upgraded connection (see
// guest.AttachRequest). Output is not capped: it is written to the host as
// it is read, so the host's reading paces the command.
func (s *Server) execAttach(w http.ResponseWriter, r *http.Request) {
	if !hasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), guest.AttachUpgrade) {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "POST /exec/attach needs Connection: Upgrade and Upgrade: %s", guest.AttachUpgrade))
		return
	}
	var req guest.AttachRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Stdin != nil || req.MaxOutput != 0 {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "exec attach: stdin comes in frames and output is not capped: leave stdin and max_output out"))
		return
	}
	p, err := s.prepare(req.ExecRequest)
	if err != nil {
		s.writeError(w, err)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	s.proxies.Add(1)
	defer s.proxies.Done()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	s.trackUpgraded(conn)
	defer s.untrackUpgraded(conn)
	defer conn.Close()
	if _, err := rw.WriteString(attachSwitching); err != nil || rw.Flush() != nil {
		return
	}
	// Frames are read 256 KiB at a time when the host sends them faster
	// than the command takes them (the server's own reader holds 4 KiB).
	s.attached(r, p, req, bufio.NewReaderSize(rw.Reader, 256<<10), conn)
}

// attached runs p with its streams on conn (read through in) and sends
// its result last.
func (s *Server) attached(r *http.Request, p prepared, req guest.AttachRequest, in io.Reader, conn net.Conn) {
	send := &frameSender{w: conn}
	oomBefore := proc.OOMKills()
	a, err := startAttached(p, req)
	if err != nil {
		res := startFailure(req.ExecRequest, err)
		// Within a frame: the command's name may be as long as the request.
		if len(res.StartError) > 4<<10 {
			res.StartError = res.StartError[:4<<10]
			res.Stderr = []byte(res.StartError + "\n")
		}
		_ = send.frame(guest.FrameStderr, res.Stderr)
		res.Stderr = nil
		send.exit(res)
		return
	}
	proc.RaiseOOMScore(p.cmd.Process.Pid)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		a.feed(in, cancel)
	}()
	var dones []<-chan struct{}
	var streams []*frameStream
	var gates []*gate
	for _, o := range a.outs {
		fs := &frameStream{send: send, typ: o.typ}
		g := &gate{w: fs}
		streams, gates = append(streams, fs), append(gates, g)
		dones = append(dones, s.pump(o.r, g))
	}
	res := s.wait(ctx, p)
	res.DurationMS = time.Since(a.start).Milliseconds()
	res.Truncated = !s.drain(streams, dones)
	for _, g := range gates {
		g.close()
	}
	res.StdoutBytes = streams[0].count()
	if len(streams) > 1 {
		res.StderrBytes = streams[1].count()
	}
	if n := proc.OOMKills(); n >= 0 && n > oomBefore {
		res.OOMKilled = true
	}
	send.exit(res)
	conn.Close() // ends feed's read
	a.closeInput()
	<-fed
}

// maxDrain bounds how long output still moving is waited for once the
// command has ended: what a background child it left keeps writing.
const maxDrain = 30 * time.Second

// drain waits for the command's outputs to reach end of file once it has
// ended. Unlike settle it waits as long as they move (a host reading
// slowly is still being sent what the command wrote before it ended), and
// gives up on an output idle for DrainGrace (held open by a background
// child with nothing to say) or after maxDrain. It reports whether every
// output was seen to its end or to idleness, so that nothing was dropped.
func (s *Server) drain(streams []*frameStream, dones []<-chan struct{}) bool {
	deadline := time.Now().Add(maxDrain)
	for i, d := range dones {
		for {
			before := streams[i].progress()
			t := time.NewTimer(s.cfg.DrainGrace)
			select {
			case <-d:
				t.Stop()
			case <-t.C:
			}
			if isDone(d) {
				break
			}
			now := streams[i].progress()
			if now == before && !streams[i].busy() {
				break // idle: held open, nothing more to say
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	return true
}

func isDone(d <-chan struct{}) bool {
	select {
	case <-d:
		return true
	default:
		return false
	}
}

// attachedCmd is a started command's ends on the guest's side.
type attachedCmd struct {
	start time.Time
	// input is where stdin frames go: the stdin pipe, the terminal, or nil.
	input *os.File
	// term is the terminal's master side when the command has one.
	term *os.File
	outs []attachedOut
}

// attachedOut is one output of the command and the frame it is sent in.
type attachedOut struct {
	r   *os.File
	typ byte
}

// startAttached starts p on a new terminal or on pipes.
func startAttached(p prepared, req guest.AttachRequest) (*attachedCmd, error) {
	if req.TTY {
		return startOnTerminal(p, req.Size)
	}
	return startOnPipes(p, req.Interactive)
}

func startOnPipes(p prepared, interactive bool) (*attachedCmd, error) {
	var parent, child []*os.File // the child's are closed once started; the parent's on failure
	ok := false
	defer func() {
		closeAll(child)
		if !ok {
			closeAll(parent)
		}
	}()
	a := &attachedCmd{}
	if interactive {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		parent, child = append(parent, w), append(child, r)
		p.cmd.Stdin, a.input = r, w
	}
	var ends [2]*os.File
	for i, typ := range []byte{guest.FrameStdout, guest.FrameStderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		parent, child = append(parent, r), append(child, w)
		a.outs, ends[i] = append(a.outs, attachedOut{r: r, typ: typ}), w
	}
	p.cmd.Stdout, p.cmd.Stderr = ends[0], ends[1]
	a.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// startOnTerminal starts p as the leader of a new session whose
// controlling terminal is a new pseudo-terminal of size ws.
func startOnTerminal(p prepared, ws guest.WindowSize) (*attachedCmd, error) {
	term, tty, err := openTerminal()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	if err := setWindowSize(term, ws); err != nil {
		term.Close()
		return nil, err
	}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	// A new session is a new process group too, so KillTree still works.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	a := &attachedCmd{start: time.Now(), input: term, term: term, outs: []attachedOut{{r: term, typ: guest.FrameStdout}}}
	if err := p.cmd.Start(); err != nil {
		term.Close()
		return nil, err
	}
	return a, nil
}

// openTerminal opens a new pseudo-terminal: its master side (non-blocking,
// so that closing it ends a read in progress) and its terminal.
func openTerminal() (term, tty *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		fd, err = unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	term = os.NewFile(uintptr(fd), "/dev/ptmx")
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		tty, err = os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	}
	if err != nil {
		term.Close()
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	return term, tty, nil
}

// setWindowSize sets the terminal's size; a zero size leaves it as it is.
func setWindowSize(term *os.File, ws guest.WindowSize) error {
	if ws.Rows == 0 || ws.Cols == 0 {
		return nil
	}
	sc, err := term.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	err = sc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	})
	return errors.Join(err, ioErr)
}

// feed takes the host's frames from in until it ends: stdin to the
// command, resizes to its terminal. A write to a command that does not read
// blocks here, and so the host's writes: back-pressure, not a buffer. The
// end of in (the host gone) cancels the command.
func (a *attachedCmd) feed(in io.Reader, cancel func()) {
	buf := make([]byte, guest.MaxFramePayload)
	dropped := a.input == nil
	for {
		typ, p, err := guest.ReadFrame(in, buf)
		if err != nil {
			cancel()
			return
		}
		switch {
		case typ == guest.FrameStdin && !dropped:
			// A command that closed its stdin gets no more; the host is not held up.
			_, err = a.input.Write(p)
			dropped = err != nil
		case typ == guest.FrameStdinEOF && !dropped && a.term != nil:
			_, _ = a.term.Write([]byte{4}) // Ctrl-D: the terminal's end of file
		case typ == guest.FrameStdinEOF && !dropped:
			a.input.Close()
			dropped = true
		case typ == guest.FrameResize && a.term != nil:
			if ws, ok := guest.ParseResize(p); ok {
				_ = setWindowSize(a.term, ws)
			}
		}
	}
}

// closeInput ends a write of feed's in progress once the command is done.
func (a *attachedCmd) closeInput() {
	if a.input != nil {
		a.input.Close()
	}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// frameSender writes whole frames to the host from several goroutines.
type frameSender struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameSender) frame(typ byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return guest.WriteFrame(f.w, typ, p)
}

// exit sends the result, the last frame.
func (f *frameSender) exit(res guest.ExecResult) {
	b, err := json.Marshal(res)
	if err == nil {
		_ = f.frame(guest.FrameExit, b)
	}
}

// frameStream is one output of the command as frames, counted.
type frameStream struct {
	send *frameSender
	typ  byte
	mu   sync.Mutex
	// n counts the bytes written; sent those the host took; writing says
	// a write waits on the host.
	n, sent int64
	writing bool
}

// Write sends p in frames, blocking while the host does not read.
func (f *frameStream) Write(p []byte) (int, error) {
	f.mu.Lock()
	f.n += int64(len(p))
	f.writing = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.writing = false
		f.mu.Unlock()
	}()
	for rest := p; len(rest) > 0; {
		n := min(len(rest), guest.MaxFramePayload)
		if err := f.send.frame(f.typ, rest[:n]); err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.sent += int64(n)
		f.mu.Unlock()
		rest = rest[n:]
	}
	return len(p), nil
}

func (f *frameStream) count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// progress is the bytes the host has taken so far.
func (f *frameStream) progress() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

// busy says a write is waiting on the host.
func (f *frameStream) busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writing
}

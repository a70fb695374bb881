package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// AttachIO is where an attached command's streams come from and go.
type AttachIO struct {
	// Stdin is copied to the command when the request is Interactive; its
	// end (or a read error) closes the command's stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it comes, one
	// frame at a time; an error from either ends the command.
	Stdout, Stderr io.Writer
	// Resize, if not nil, carries the terminal's new sizes (TTY only).
	Resize <-chan WindowSize
}

// ExecAttach runs req attached to a connection of its own (POST
// /exec/attach) and returns its result once it has ended. Output is
// streamed, never buffered beyond one frame, and never capped here: the
// caller's writers decide what to keep, and a slow writer slows the
// command. An error writing output, ctx's end or a broken connection kills
// the command. ExecAttach does not wait for a Read of Stdin in progress
// when the command ends (a terminal's Read cannot be interrupted): that
// goroutine ends when the Read returns, its bytes dropped.
func (c *Client) ExecAttach(ctx context.Context, req AttachRequest, aio AttachIO) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, execDeadline(req.ExecRequest))
	defer cancel()
	conn, err := c.upgradeAttach(ctx, req)
	if err != nil {
		return ExecResult{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	w := &frameWriter{w: conn}
	if req.Interactive && aio.Stdin != nil {
		go copyStdin(w, aio.Stdin)
	}
	var resizes sync.WaitGroup
	done := make(chan struct{})
	if aio.Resize != nil {
		resizes.Add(1)
		go func() {
			defer resizes.Done()
			forwardResizes(w, aio.Resize, done)
		}()
	}
	res, err := readAttached(bufio.NewReaderSize(conn, 256<<10), aio)
	// Closed before waiting for the writers: a guest that stopped reading
	// would hold a resize's or stdin's write, and so this call, until ctx ends.
	conn.Close()
	close(done)
	resizes.Wait()
	if err != nil && ctx.Err() != nil {
		return res, fmt.Errorf("guest exec attach: %w", context.Cause(ctx))
	}
	return res, err
}

// upgradeAttach asks for POST /exec/attach and returns the upgraded connection.
func (c *Client) upgradeAttach(ctx context.Context, req AttachRequest) (io.ReadWriteCloser, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://guest/exec/attach", jsonBody(req))
	if err != nil {
		return nil, fmt.Errorf("guest exec attach: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", AttachUpgrade)
	resp, err := c.http.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guest exec attach: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: exec attach: %w", ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || !strings.EqualFold(resp.Header.Get("Upgrade"), AttachUpgrade) {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: exec attach: upgraded to %.40q, not %s", ErrUnavailable, resp.Header.Get("Upgrade"), AttachUpgrade)
	}
	return conn, nil
}

// readAttached writes the output frames to aio until FrameExit.
func readAttached(conn io.Reader, aio AttachIO) (ExecResult, error) {
	buf := make([]byte, MaxFramePayload)
	for {
		typ, p, err := ReadFrame(conn, buf)
		if err != nil {
			return ExecResult{}, fmt.Errorf("%w: exec attach ended early: %w", ErrUnavailable, err)
		}
		var out io.Writer
		switch typ {
		case FrameStdout:
			out = aio.Stdout
		case FrameStderr:
			out = aio.Stderr
		case FrameExit:
			var res ExecResult
			if err := json.Unmarshal(p, &res); err != nil {
				return ExecResult{}, fmt.Errorf("%w: exec attach: bad result: %w", ErrUnavailable, err)
			}
			return res, nil
		default:
			return ExecResult{}, fmt.Errorf("%w: exec attach: unknown frame type %d", ErrUnavailable, typ)
		}
		if _, err := out.Write(p); err != nil {
			return ExecResult{}, fmt.Errorf("exec attach: output: %w", err)
		}
	}
}

// copyStdin sends r as FrameStdin frames, then FrameStdinEOF.
func copyStdin(w *frameWriter, r io.Reader) {
	buf := make([]byte, MaxFramePayload)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if w.write(FrameStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = w.write(FrameStdinEOF, nil)
			return
		}
	}
}

// forwardResizes sends each size from sizes until done.
func forwardResizes(w *frameWriter, sizes <-chan WindowSize, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case ws, ok := <-sizes:
			if !ok {
				return
			}
			if w.write(FrameResize, ResizePayload(ws)) != nil {
				return
			}
		}
	}
}

// frameWriter writes whole frames from several goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) write(typ byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return WriteFrame(f.w, typ, p)
}

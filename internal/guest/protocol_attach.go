package guest

import (
	"encoding/binary"
	"fmt"
	"io"
)

// POST /exec/attach runs one command attached to the connection, as
// `docker run -i [-t]` does: the request carries an AttachRequest as its
// JSON body and Connection: Upgrade, Upgrade: AttachUpgrade. A request the
// guest refuses is answered with an error as any other; else it answers
// 101 and the connection then carries frames both ways until the guest
// sends FrameExit and closes it. Each frame is a type byte, a big-endian
// uint32 length and that many bytes (at most MaxFramePayload).
//
// Nothing is buffered beyond one frame at each end: the guest writes the
// command's output to the connection as it reads it, so a host that reads
// slowly slows the command down (back-pressure), and it feeds stdin frames
// to the command as it takes them, so a command that does not read stops
// the host's writes. The guest applies no output cap on this route (the
// host caps what it keeps, if anything); a host that closes the
// connection before FrameExit kills the command.

// AttachUpgrade is the protocol named in the Upgrade header of POST /exec/attach.
const AttachUpgrade = "agentbox-exec"

// AttachRequest is the body of POST /exec/attach. ExecRequest.Stdin and
// MaxOutput must be empty: stdin comes in frames, and output is not capped.
type AttachRequest struct {
	ExecRequest
	// Interactive gives the command the host's FrameStdin bytes as its
	// stdin; false gives it /dev/null (in a terminal, an idle one).
	Interactive bool `json:"interactive,omitempty"`
	// TTY runs the command on a new pseudo-terminal of Size: its stdout
	// and stderr both come as FrameStdout, with the terminal's line
	// discipline applied (a pseudo-terminal has a single output).
	TTY  bool       `json:"tty,omitempty"`
	Size WindowSize `json:"size,omitzero"`
}

// WindowSize is a terminal's size in characters.
type WindowSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// The frames of an attached command. The host sends FrameStdin,
// FrameStdinEOF and FrameResize; the guest FrameStdout, FrameStderr and,
// last, FrameExit.
const (
	// FrameStdout and FrameStderr carry the command's output.
	FrameStdout byte = 1
	FrameStderr byte = 2
	// FrameExit carries the ExecResult (JSON, without output bodies).
	FrameExit byte = 3
	// FrameStdin carries bytes for the command's stdin.
	FrameStdin byte = 4
	// FrameStdinEOF closes the command's stdin (in a terminal: sends it
	// the end-of-file character, as a user typing Ctrl-D would).
	FrameStdinEOF byte = 5
	// FrameResize carries a new WindowSize: rows then columns, two
	// big-endian uint16s.
	FrameResize byte = 6
)

// MaxFramePayload bounds one frame; a larger length is a protocol error.
const MaxFramePayload = 64 << 10

// WriteFrame writes one frame of type typ carrying p (at most MaxFramePayload bytes).
func WriteFrame(w io.Writer, typ byte, p []byte) error {
	if len(p) > MaxFramePayload {
		return fmt.Errorf("frame of %d bytes, over %d", len(p), MaxFramePayload)
	}
	// One write per frame: each write may be a syscall or a yamux frame.
	b := make([]byte, 5, 5+len(p))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	_, err := w.Write(append(b, p...))
	return err
}

// ReadFrame reads one frame into buf (which must hold MaxFramePayload
// bytes) and returns its type and payload, a slice of buf. A length over
// MaxFramePayload is an error: the peer is not trusted.
func ReadFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFramePayload || int(n) > len(buf) {
		return 0, nil, fmt.Errorf("%w: frame of %d bytes, over %d", ErrUnavailable, n, MaxFramePayload)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, fmt.Errorf("frame: %w", io.ErrUnexpectedEOF)
	}
	return hdr[0], buf[:n], nil
}

// ResizePayload encodes ws for FrameResize.
func ResizePayload(ws WindowSize) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, ws.Rows), ws.Cols)
}

// ParseResize decodes a FrameResize payload.
func ParseResize(p []byte) (WindowSize, bool) {
	if len(p) != 4 {
		return WindowSize{}, false
	}
	return WindowSize{Rows: binary.BigEndian.Uint16(p), Cols: binary.BigEndian.Uint16(p[2:])}, true
}

package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameReadFile is the read_file tool's name.
const NameReadFile = "read_file"

// Limits of one read_file call.
const (
	// ReadMaxLines is the most lines one call returns.
	ReadMaxLines = 2000
	// ReadMaxLineBytes is where a very long line is cut.
	ReadMaxLineBytes = 2000
	// countLimit is how far past the shown lines a read goes on to count the
	// file's lines; past it, the total is left unsaid.
	countLimit = 4 << 20
	// readChunk is how much one request to the guest reads.
	readChunk = 256 << 10
)

// ReadFileTool shows a text file with line numbers.
type ReadFileTool struct{}

var readFileSchema = object([]string{"path"},
	str("path", "The file to read: relative to /workspace (e.g. \"src/app.py\") or absolute inside /workspace."),
	integer("start_line", "The first line to show, 1-based (default 1).", 1, 0),
	integer("end_line", "The last line to show, inclusive (default: as far as the limits allow).", 1, 0),
)

var readFileDescription = fmt.Sprintf(`Read a text file from the workspace. Lines are shown numbered like "cat -n": the line number, a tab, then the line's text. The numbers are not part of the file; never copy them into edit_file's old_string.

- At most %d lines or about %d bytes (the tool output limit) come back per call; when more remain, a note at the end gives the start_line to read on from. Use start_line and end_line to read a part of a large file.
- Lines longer than %d bytes are cut.
- Binary files (containing NUL bytes) are refused: inspect them with bash (file, xxd | head, python3).
- Only paths inside /workspace can be read.`, ReadMaxLines, DefaultMaxOutput, ReadMaxLineBytes)

// Spec describes the read_file tool to the model.
func (ReadFileTool) Spec() llm.Tool { return readFileSpec }

var readFileSpec = spec(NameReadFile, readFileDescription, readFileSchema)

type readFileInput struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
}

// Run reads the asked lines of the file.
func (ReadFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in readFileInput
	if r, ok := decodeInput(NameReadFile, readFileSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if in.EndLine > 0 && in.EndLine < max(in.StartLine, 1) {
		return errorf("read_file: end_line %d is before start_line %d", in.EndLine, max(in.StartLine, 1)), nil
	}
	fi, r, ok, err := statFile(ctx, g, NameReadFile, in.Path)
	if !ok || err != nil {
		return r, err
	}
	rd := &lineReader{in: in, max: env.maxOutput(), size: fi.Size}
	return rd.read(ctx, g)
}

// statFile checks that path names a file (or a symlink to one); ok is false
// when the returned Result or error should be returned as is.
func statFile(ctx context.Context, g *guest.Client, tool, path string) (guest.FileInfo, Result, bool, error) {
	if strings.TrimSpace(path) == "" {
		return guest.FileInfo{}, errorf("%s: path is empty", tool), false, nil
	}
	fi, err := g.Stat(ctx, path)
	if err != nil {
		r, err := failure(tool, err)
		return fi, r, false, err
	}
	switch fi.Type {
	case "dir":
		return fi, errorf("%s: %s is a directory, not a file. Use list_files to see its contents", tool, fi.Path), false, nil
	case "other":
		return fi, errorf("%s: %s is not a regular file (a device, socket or pipe)", tool, fi.Path), false, nil
	}
	return fi, Result{}, true, nil
}

// lineReader reads one range of a file's lines through the guest.
type lineReader struct {
	in   readFileInput
	max  int
	size int64

	out       strings.Builder
	first     int  // first line shown
	last      int  // last line shown
	total     int  // lines counted so far
	stopped   bool // a limit ended the read before end_line or the file's end
	uncounted bool // the file's end was not reached
}

func (r *lineReader) read(ctx context.Context, g *guest.Client) (Result, error) {
	src := &guestReader{ctx: ctx, g: g, path: r.in.Path}
	br := bufio.NewReaderSize(src, readChunk)
	if head, err := br.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return errorf("read_file: %s is a binary file (%d bytes, it contains NUL bytes); read_file shows text only. Inspect it with bash instead, e.g. \"file %[1]s\" or \"xxd %[1]s | head -50\"", r.in.Path, r.size), nil
	} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return failure(NameReadFile, src.cause(err))
	}
	if err := r.scan(br); err != nil {
		return failure(NameReadFile, src.cause(err))
	}
	return r.result(), nil
}

// scan walks the file's lines, keeping the asked ones within the limits
// and counting the rest while that stays cheap.
func (r *lineReader) scan(br *bufio.Reader) error {
	start := max(r.in.StartLine, 1)
	var counted int64
	for {
		line, n, err := readLine(br)
		if n == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		r.total++
		switch {
		case r.total < start:
		case r.done():
			if counted += int64(n) + 1; counted > countLimit {
				r.uncounted = true
				return nil
			}
		default:
			r.keep(line, n)
		}
		if err != nil { // the last line, without a final newline
			return nil
		}
	}
}

// done reports whether no more lines are to be shown.
func (r *lineReader) done() bool {
	return r.stopped || r.in.EndLine > 0 && r.total > r.in.EndLine
}

// keep adds one line to the output, or stops the output at a limit.
func (r *lineReader) keep(line []byte, n int) {
	text := strings.TrimSuffix(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
	if n > len(line) {
		text += fmt.Sprintf(" … [line cut: %d bytes in all]", n)
	}
	entry := fmt.Sprintf("%6d\t%s\n", r.total, text)
	if r.first > 0 && (r.last-r.first+1 >= ReadMaxLines || r.out.Len()+len(entry) > r.max-200) {
		r.stopped = true
		return
	}
	if r.first == 0 {
		r.first = r.total
	}
	r.last = r.total
	r.out.WriteString(entry)
}

func (r *lineReader) result() Result {
	start := max(r.in.StartLine, 1)
	switch {
	case r.total == 0:
		return Result{Text: fmt.Sprintf("(%s is empty: 0 bytes)", r.in.Path)}
	case r.first == 0:
		return errorf("read_file: start_line %d is past the end of %s, which has %d lines", start, r.in.Path, r.total)
	}
	text := r.out.String()
	switch {
	case r.stopped && r.uncounted:
		text += fmt.Sprintf("[showing lines %d-%d; the file (%d bytes) goes on: to read on, call read_file with start_line=%d]\n", r.first, r.last, r.size, r.last+1)
	case r.stopped:
		text += fmt.Sprintf("[showing lines %d-%d of %d: to read on, call read_file with start_line=%d]\n", r.first, r.last, r.total, r.last+1)
	case r.uncounted:
		text += fmt.Sprintf("[showing lines %d-%d; the file (%d bytes) goes on]\n", r.first, r.last, r.size)
	case r.first > 1 || r.last < r.total:
		text += fmt.Sprintf("[showing lines %d-%d of %d]\n", r.first, r.last, r.total)
	}
	return Result{Text: text}
}

// readLine reads one line without its newline, keeping at most
// ReadMaxLineBytes of it; n is the line's full length.
func readLine(br *bufio.Reader) (line []byte, n int, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if room := ReadMaxLineBytes - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if bytes.HasSuffix(chunk, []byte("\n")) {
				n--
				line = bytes.TrimSuffix(line, []byte("\n"))
			}
			return line, n, err
		}
	}
}

// guestReader reads a file through the guest, one range per Read.
type guestReader struct {
	ctx  context.Context
	g    *guest.Client
	path string
	off  int64
	err  error // the guest's error, kept whole for cause
}

func (r *guestReader) Read(p []byte) (int, error) {
	data, err := r.g.ReadRange(r.ctx, r.path, r.off, int64(len(p)))
	if err != nil {
		r.err = err
		return 0, err
	}
	if len(data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, data)
	r.off += int64(n)
	return n, nil
}

// cause returns the guest's own error behind err, if there was one.
func (r *guestReader) cause(err error) error {
	if r.err != nil {
		return r.err
	}
	return err
}

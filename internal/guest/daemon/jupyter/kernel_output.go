package jupyter

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/output"
)

// Caps on one kernel execution.
const (
	// maxKernelCode caps the code of one request.
	maxKernelCode = 1 << 20
	// maxKernelImages caps the images saved from one execution.
	maxKernelImages = 8
	// maxImageBytes caps one image; a bigger one is not saved.
	maxImageBytes = 4 << 20
	// maxAnswer caps the encoded size of an answer, under the client's cap
	// of 16 MiB and more: images past it are saved but returned without
	// their data.
	maxAnswer = 15 << 20
	// maxErrorValue and maxTraceEntry cap an exception's text.
	maxErrorValue = 64 << 10
	maxTraceEntry = 16 << 10
	// maxTraceEntries caps a traceback's entries; the first and last are kept.
	maxTraceEntries = 60
)

// kernelOutputDir is where displayed images are saved, in the workspace.
const kernelOutputDir = ".agentbox/outputs"

// imageTypes are the displayed media types saved as images, with their
// file extensions.
var imageTypes = []struct{ mediaType, ext string }{
	{"image/png", "png"},
	{"image/jpeg", "jpg"},
}

// collector gathers the output of one execution from the kernel's iopub
// messages, capping it as exec output is capped.
type collector struct {
	// save writes an image to a new workspace file.
	save saveFunc

	stdout, stderr, result *output.Capture
	parts                  int // display outputs written to result
	err                    *guest.KernelError
	images                 []guest.KernelImage
	count                  int // the execution count, once the kernel has said it
	notes                  []string
}

func newCollector(save saveFunc) *collector {
	return &collector{
		save:   save,
		stdout: output.NewCapture(guest.DefaultMaxOutput), stderr: output.NewCapture(guest.DefaultMaxOutput), result: output.NewCapture(guest.DefaultMaxOutput),
	}
}

// add records one iopub message the execution caused.
func (c *collector) add(m jmsg) {
	switch m.Header.MsgType {
	case "stream":
		var s struct{ Name, Text string }
		if json.Unmarshal(m.Content, &s) == nil {
			c.stream(s.Name, s.Text)
		}
	case "execute_input":
		var s struct {
			ExecutionCount int `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &s) == nil {
			c.count = s.ExecutionCount
		}
	case "execute_result", "display_data", "update_display_data":
		var d struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Content, &d) == nil {
			c.display(d.Data)
		}
	case "error":
		var e struct {
			Ename     string   `json:"ename"`
			Evalue    string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &e) == nil && c.err == nil {
			c.err = kernelError(e.Ename, e.Evalue, e.Traceback)
		}
	}
}

func (c *collector) stream(name, text string) {
	if name == "stderr" {
		_, _ = c.stderr.Write([]byte(text))
	} else {
		_, _ = c.stdout.Write([]byte(text))
	}
}

// display records a rich output: its image if it has one, else its text.
// A plot's text form ("<Figure size 640x480 with 1 Axes>") says nothing
// the image does not.
func (c *collector) display(data map[string]json.RawMessage) {
	for _, t := range imageTypes {
		if raw, ok := data[t.mediaType]; ok {
			c.image(t.mediaType, t.ext, raw)
			return
		}
	}
	var text string
	if json.Unmarshal(data["text/plain"], &text) != nil || text == "" {
		return
	}
	if c.parts > 0 {
		_, _ = c.result.Write([]byte("\n"))
	}
	c.parts++
	_, _ = c.result.Write([]byte(text))
}

// image saves a displayed image into the workspace.
func (c *collector) image(mediaType, ext string, raw json.RawMessage) {
	n := len(c.images) + 1
	if n > maxKernelImages {
		c.note("image %d not saved: over the cap of %d images per execution", n, maxKernelImages)
		return
	}
	var b64 string
	if err := json.Unmarshal(raw, &b64); err != nil {
		c.note("image %d not saved: not base64 text", n)
		return
	}
	if base64.StdEncoding.DecodedLen(len(b64)) > maxImageBytes+64 {
		c.note("image %d not saved: over %d bytes", n, maxImageBytes)
		return
	}
	data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(b64), ""))
	if err != nil || len(data) > maxImageBytes {
		c.note("image %d not saved: bad base64 or over %d bytes", n, maxImageBytes)
		return
	}
	name, err := c.save(data, func(try int) string {
		if try == 0 {
			return fmt.Sprintf("python-%d-%d.%s", c.count, n, ext)
		}
		return fmt.Sprintf("python-%d-%d-%d.%s", c.count, n, try+1, ext)
	})
	if err != nil {
		c.note("image %d not saved: %v", n, err)
		return
	}
	c.images = append(c.images, guest.KernelImage{Path: name, MediaType: mediaType, Data: data})
}

func (c *collector) note(format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// fill puts what was collected into res.
func (c *collector) fill(res *guest.KernelResult) {
	out, _, _ := c.stdout.Result()
	errOut, _, _ := c.stderr.Result()
	result, _, _ := c.result.Result()
	res.Stdout, res.Stderr, res.Result = string(out), string(errOut), string(result)
	for _, n := range c.notes {
		if res.Result != "" {
			res.Result += "\n"
		}
		res.Result += "[agentbox: " + n + "]"
	}
	res.Error, res.Images = c.err, c.images
	if res.ExecutionCount == 0 {
		res.ExecutionCount = c.count
	}
	budget := maxAnswer - jsonSize(res.Stdout) - jsonSize(res.Stderr) - jsonSize(res.Result) - jsonSize(res.Error)
	for i := range res.Images {
		img := &res.Images[i]
		if n := base64.StdEncoding.EncodedLen(len(img.Data)); n <= budget {
			budget -= n
		} else {
			img.Data = nil
		}
	}
}

// jsonSize is the size of v encoded as JSON: text with control characters
// grows up to sixfold.
func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// kernelError builds an exception's report, without terminal colours and
// capped in size.
func kernelError(name, value string, tb []string) *guest.KernelError {
	e := &guest.KernelError{Name: stripANSI(name), Value: clip(stripANSI(value), maxErrorValue)}
	if len(tb) > maxTraceEntries {
		head, tail := tb[:maxTraceEntries/3], tb[len(tb)-(maxTraceEntries-maxTraceEntries/3):]
		marker := fmt.Sprintf("[agentbox: %d traceback entries omitted here]", len(tb)-maxTraceEntries)
		tb = append(append(append([]string{}, head...), marker), tail...)
	}
	for _, t := range tb {
		e.Traceback = append(e.Traceback, clip(stripANSI(t), maxTraceEntry))
	}
	return e
}

// ansiEscape matches terminal escape sequences: CSI (colours, cursor
// movement), OSC (titles, links), and the rest (charset designations,
// two-byte escapes).
var ansiEscape = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]`)

func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiEscape.ReplaceAllString(s, "")
}

// clip keeps the head and tail of s within limit bytes, like exec output.
func clip(s string, limit int64) string {
	if int64(len(s)) <= limit {
		return s
	}
	c := output.NewCapture(limit)
	_, _ = c.Write([]byte(s))
	b, _, _ := c.Result()
	return strings.ToValidUTF8(string(b), "")
}

// outputs is the workspace, as the kernel saves images into it.
type outputs struct{ root Workspace }

// saveOutput writes data to a new file in the workspace's output
// directory, trying the names name(0), name(1), ... until one is free, so
// an image from an earlier kernel (whose execution counts started again at
// 1) is never overwritten. It returns the workspace-relative path.
func (s outputs) saveOutput(data []byte, name func(int) string) (string, error) {
	if err := s.root.MkdirAll(kernelOutputDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", kernelOutputDir, err)
	}
	for try := range 100 {
		p := path.Join(kernelOutputDir, name(try))
		f, err := s.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create %s: %w", p, err)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = s.root.Remove(p)
			return "", fmt.Errorf("write %s: %w", p, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("no free name in %s", kernelOutputDir)
}

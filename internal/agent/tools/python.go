package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NamePython is the python tool's name.
const NamePython = "python"

// Images of one python call the model is shown: at most maxKernelImages,
// each at most maxKernelImage bytes; the others are only named.
const (
	maxKernelImages = 3
	maxKernelImage  = 1_500_000
)

// PythonTool runs code in the sandbox's persistent Jupyter kernel.
type PythonTool struct{}

var pythonSchema = object([]string{"code"},
	str("code", "The Python code to run, like a notebook cell: the value of its last expression is shown."),
	integer("timeout_seconds", "How long the code may run before it is interrupted, in seconds (default 120, at most 1800).", 1, int64(MaxTimeout.Seconds())),
)

const pythonDescription = `Run Python code in a persistent Jupyter (IPython) kernel in the sandbox, like the cells of a notebook: variables, imports and functions defined in one call are still there in the next.

- Prefer it to run_code and bash for stateful, step-by-step work: load data once and then inspect, clean and analyse it in further calls (pandas, numpy), and for plots: figures (matplotlib) are shown to you as images, up to 3 a call, and saved in the workspace.
- The working directory is /workspace; files you save there stay, and the kernel can import modules from it.
- Use bash for shell commands, builds and test suites, and run_code for a one-off program that needs a fresh process or TypeScript.
- You see what the code printed (stderr marked as such), the value of the last expression after Out[N]:, and an exception with its traceback (reported as an error).
- Code running past timeout_seconds (default 120, max 1800) is interrupted; if the kernel does not stop, it is restarted.
- If the kernel was restarted (it crashed, ran out of memory, or could not be interrupted), the result says so on its first line: everything defined before is gone, so run the code that defines what you need again.`

// Spec describes the python tool to the model.
func (PythonTool) Spec() llm.Tool { return pythonSpec }

var pythonSpec = spec(NamePython, pythonDescription, pythonSchema)

type pythonInput struct {
	Code           string `json:"code"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// Run executes the code in the kernel and reports what it printed,
// returned and raised, with the images it displayed.
func (PythonTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in pythonInput
	if r, ok := decodeInput(NamePython, pythonSchema, input, &in); !ok {
		return r, nil
	}
	if strings.TrimSpace(in.Code) == "" {
		return errorf("python: code is empty"), nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	timeout := env.timeout(in.TimeoutSeconds)
	since := time.Now()
	res, err := g.KernelExecute(ctx, guest.KernelRequest{Code: in.Code, TimeoutMS: timeout.Milliseconds()})
	if err == nil {
		err = canceled(ctx)
	}
	if err != nil {
		return slowFailure(ctx, NamePython, err)
	}
	return env.withDenials(since, kernelResult(res, timeout)), nil
}

// kernelResult renders a kernel execution for the model as a notebook
// shows a cell's output: stdout as it is, stderr marked, the value after
// Out[N], an exception and its traceback; notes on a restart or timeout
// come first, the saved images last.
func kernelResult(res guest.KernelResult, timeout time.Duration) Result {
	var b strings.Builder
	if res.Restarted != "" {
		b.WriteString(restartNote(res.Restarted) + "\n")
	}
	if res.TimedOut {
		fmt.Fprintf(&b, "timed out after %s: the code was interrupted; the output up to then is below. Raise timeout_seconds (up to %d), or do the work in smaller steps.\n",
			seconds(timeout), int(MaxTimeout.Seconds()))
	}
	line(&b, res.Stdout)
	section(&b, "stderr", res.Stderr)
	if res.Result != "" {
		line(&b, outPrompt(res.ExecutionCount)+res.Result)
	}
	if e := res.Error; e != nil {
		line(&b, errorText(e))
	}
	images, notes := kernelImages(res.Images)
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	if b.Len() == 0 {
		b.WriteString("(no output)\n")
	}
	return Result{Text: b.String(), IsError: res.Error != nil || res.TimedOut, Images: images}
}

// line writes text ending in a newline.
func line(b *strings.Builder, text string) {
	if text == "" {
		return
	}
	b.WriteString(strings.ToValidUTF8(text, "\uFFFD"))
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
}

// outPrompt is what a notebook shows before a cell's value.
func outPrompt(count int) string {
	if count > 0 {
		return fmt.Sprintf("Out[%d]: ", count)
	}
	return "Out: "
}

// restartNote is the first line of a result after the kernel restarted.
// The guest says why in a sentence or two; a bare reason is put in one.
func restartNote(why string) string {
	why = strings.TrimSpace(why)
	if !strings.HasSuffix(why, ".") {
		return "Note: the Python kernel was restarted (" + why + "): earlier variables and imports are gone; run the code that defines what you need again."
	}
	if !strings.Contains(why, "gone") {
		why += " Earlier variables and imports are gone."
	}
	return "Note: " + why + " Run the code that defines what you need again."
}

// errorText is an exception as "Name: value" and its traceback, without
// the traceback's last line when it says the same.
func errorText(e *guest.KernelError) string {
	head := e.Name
	if e.Value != "" {
		head += ": " + e.Value
	}
	tb := e.Traceback
	if n := len(tb); n > 0 && strings.TrimSpace(tb[n-1]) == head {
		tb = tb[:n-1]
	}
	if len(tb) == 0 {
		return head
	}
	return head + "\n" + strings.Join(tb, "\n")
}

// viewable are the image formats the models take.
var viewable = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// kernelImages picks the images to show and says where each was saved.
func kernelImages(imgs []guest.KernelImage) ([]llm.Image, []string) {
	var shown []llm.Image
	var notes []string
	for _, img := range imgs {
		note := "Saved image: " + img.Path
		if !strings.HasPrefix(img.Path, "/") {
			note = "Saved image: " + workspacePath(img.Path)
		}
		switch {
		case len(img.Data) == 0:
		case !viewable[img.MediaType]:
			note += fmt.Sprintf(" (not shown: %s is not a format you can see)", img.MediaType)
		case len(img.Data) > maxKernelImage:
			note += fmt.Sprintf(" (not shown: %d bytes is too large)", len(img.Data))
		case len(shown) == maxKernelImages:
			note += fmt.Sprintf(" (not shown: only %d images are shown a call)", maxKernelImages)
		default:
			shown = append(shown, llm.Image{MediaType: img.MediaType, Data: img.Data})
		}
		notes = append(notes, note)
	}
	return shown, notes
}

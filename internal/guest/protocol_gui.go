package guest

import "time"

// The desktop, the notebook kernel and the web-service proxy: what the host
// may ask of the sandbox's graphical and Jupyter stack. Nothing of that stack
// runs until one of these is first asked for.

// Service names of the guest's supervised web services, as used in the
// proxy route GET|POST|... /proxy/{service}/{path...}.
const (
	// ServiceDesktop is noVNC (websockify) connected to the sandbox's display.
	ServiceDesktop = "desktop"
	// ServiceJupyter is the Jupyter notebook server.
	ServiceJupyter = "jupyter"
)

// Desktop defaults.
const (
	DefaultDisplayWidth  = 1024
	DefaultDisplayHeight = 768
	// Display is the X display the sandbox's desktop runs on.
	Display = ":1"
)

// Point is a position on the screen, in pixels from the top-left corner.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// DesktopAction is one input to, or capture of, the sandbox's display. The
// action names and their fields follow Anthropic's computer-use tool:
// screenshot, cursor_position, mouse_move, left_click, right_click,
// middle_click, double_click, triple_click, left_mouse_down, left_mouse_up,
// left_click_drag, scroll, type, key, hold_key, wait. Coordinates are screen
// pixels; scaling for a model is the caller's business.
type DesktopAction struct {
	Action string `json:"action"`
	// Coordinate is where a mouse action happens (the end, for a drag);
	// nil means where the pointer is.
	Coordinate *Point `json:"coordinate,omitempty"`
	// Start is where left_click_drag begins; nil means where the pointer is.
	Start *Point `json:"start,omitempty"`
	// Text is what type types; for key and hold_key an xdotool key
	// combination ("ctrl+s", "Return"); for clicks and scroll, modifier
	// keys held during the action ("shift", "ctrl+alt").
	Text string `json:"text,omitempty"`
	// ScrollDirection is up, down, left or right; ScrollAmount the number
	// of wheel clicks (default 3).
	ScrollDirection string `json:"scroll_direction,omitempty"`
	ScrollAmount    int    `json:"scroll_amount,omitempty"`
	// DurationMS is how long hold_key holds and wait waits (at most 100 s).
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Screenshot asks for a screenshot after the action; "screenshot"
	// always takes one.
	Screenshot bool `json:"screenshot,omitempty"`
	// ScaleWidth and ScaleHeight, when both set, are the size the
	// screenshot is scaled to (never up).
	ScaleWidth  int `json:"scale_width,omitempty"`
	ScaleHeight int `json:"scale_height,omitempty"`
}

// DesktopResult is the outcome of a DesktopAction.
type DesktopResult struct {
	// Width and Height are the screen's size in pixels.
	Width  int `json:"width"`
	Height int `json:"height"`
	// Cursor is the pointer's position after the action.
	Cursor Point `json:"cursor"`
	// PNG is the screenshot, if one was taken, at the scaled size.
	PNG []byte `json:"png,omitempty"`
}

// DesktopInfo describes the running desktop (POST /desktop/start).
type DesktopInfo struct {
	Display string `json:"display"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
}

// The bounds of a kernel call besides its code's own timeout, which the
// guest keeps so that the client, which waits the code's timeout plus
// KernelCallMargin, always gets an answer.
const (
	// KernelPrepareTimeout bounds what a call does before its code runs:
	// starting the notebook server, and starting or replacing the kernel.
	KernelPrepareTimeout = 2 * time.Minute
	// KernelSettleTimeout bounds what a call does after its code ran:
	// interrupting it, and replacing a kernel that died or would not stop.
	KernelSettleTimeout = time.Minute
	// KernelCallMargin is how much longer than the code's timeout a call
	// may take: both bounds above, and the answer's transfer.
	KernelCallMargin = KernelPrepareTimeout + KernelSettleTimeout + 30*time.Second
)

// KernelRequest runs code in the sandbox's persistent Jupyter (IPython) kernel.
type KernelRequest struct {
	Code string `json:"code"`
	// TimeoutMS interrupts the code when it passes (then restarts the
	// kernel if the interrupt does not take); 0 means DefaultExecTimeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// KernelResult is the outcome of one execution in the kernel.
type KernelResult struct {
	// Stdout and Stderr are the streams' text, capped like exec output.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Result is the text/plain form of the value of the last expression,
	// and of any other rich display output with a text form (but an
	// image's, such as "<Figure size 640x480 with 1 Axes>"), capped like
	// Stdout.
	Result string `json:"result,omitempty"`
	// Error is the exception the code raised, if any.
	Error *KernelError `json:"error,omitempty"`
	// Images are the images the code displayed (a plot), each saved into
	// the workspace: PNG or JPEG, at most 8 of at most 4 MiB each.
	Images []KernelImage `json:"images,omitempty"`
	// Restarted, when not empty, says why the kernel was (re)started during
	// this call — before the code ran (it had died), or after (the code
	// killed it, or would not stop): its variables and imports from
	// earlier calls are gone. The first start is not reported.
	Restarted string `json:"restarted,omitempty"`
	// TimedOut says the code ran past its timeout and was interrupted;
	// Restarted says whether the kernel had to be restarted for it.
	TimedOut bool `json:"timed_out,omitempty"`
	// ExecutionCount is the kernel's counter for this execution.
	ExecutionCount int `json:"execution_count,omitempty"`
}

// KernelError is an exception raised in the kernel.
type KernelError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback,omitempty"` // ANSI colour codes removed
}

// KernelImage is an image displayed by kernel code.
type KernelImage struct {
	// Path is where it was saved, relative to the workspace.
	Path      string `json:"path"`
	MediaType string `json:"media_type"`
	// Data is the image; nil for the images past what fits in an answer
	// of 15 MiB (they are saved all the same).
	Data []byte `json:"data"`
}

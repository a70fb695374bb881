package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameComputer is the desktop tool's name, the one Anthropic's native
// computer-use tool must have.
const NameComputer = "computer"

// settleDelay is how long an action is given to take effect on the screen
// before the screenshot that shows it.
const settleDelay = time.Second

// ComputerTool uses the sandbox's desktop with the actions and input of
// Anthropic's computer-use tool (computer_20250124). The model sees the
// screen scaled to a size Anthropic recommends (see ScaledSize) and gives
// coordinates in that space; they are mapped to screen pixels here.
type ComputerTool struct {
	// Width and Height are the sandbox's screen size in pixels, as its
	// sandbox.Spec's Display says; zero means 1024x768.
	Width, Height int
}

// The actions, in the order the schema lists them.
var computerActions = []string{"key", "hold_key", "type", "cursor_position", "mouse_move",
	"left_mouse_down", "left_mouse_up", "left_click", "left_click_drag", "right_click",
	"middle_click", "double_click", "triple_click", "scroll", "wait", "screenshot"}

// actionRule is which optional fields an action needs and which it takes.
type actionRule struct{ need, may []string }

var clickRule = actionRule{may: []string{"coordinate", "text"}}

var actionRules = map[string]actionRule{
	"key":             {need: []string{"text"}},
	"hold_key":        {need: []string{"text", "duration"}},
	"type":            {need: []string{"text"}},
	"cursor_position": {},
	"mouse_move":      {need: []string{"coordinate"}},
	"left_mouse_down": {},
	"left_mouse_up":   {},
	"left_click":      clickRule,
	"left_click_drag": {need: []string{"coordinate"}, may: []string{"start_coordinate"}},
	"right_click":     clickRule,
	"middle_click":    clickRule,
	"double_click":    clickRule,
	"triple_click":    clickRule,
	"scroll":          {need: []string{"scroll_direction"}, may: []string{"coordinate", "scroll_amount", "text"}},
	"wait":            {need: []string{"duration"}},
	"screenshot":      {},
}

var computerSchema = object([]string{"action"},
	enum("action", "What to do. key: press a key combination (text, xdotool syntax: \"Return\", \"ctrl+s\"). hold_key: hold keys down (text) for duration seconds. "+
		"type: type text. cursor_position: report the pointer's position. mouse_move: move the pointer to coordinate. "+
		"left_mouse_down / left_mouse_up: press or release the left button where the pointer is. "+
		"left_click, right_click, middle_click, double_click, triple_click: click at coordinate (or where the pointer is), holding the modifier keys in text if given. "+
		"left_click_drag: drag from start_coordinate (or the pointer) to coordinate. scroll: turn the wheel scroll_amount clicks in scroll_direction at coordinate. "+
		"wait: wait duration seconds. screenshot: see the screen.", computerActions...),
	point("coordinate", "[x, y]: pixels from the screen's top-left corner, in the screenshot's size."),
	point("start_coordinate", "[x, y] where left_click_drag starts."),
	str("text", "The text to type, the keys to press (key, hold_key), or modifier keys held during a click or scroll (\"shift\", \"ctrl\")."),
	enum("scroll_direction", "Which way scroll turns the wheel.", "up", "down", "left", "right"),
	integer("scroll_amount", "How many wheel clicks to scroll (default 3).", 1, 100),
	number("duration", "Seconds to hold keys (hold_key) or to wait (wait), at most 100.", 0, 100),
)

const computerDescription = `Use the sandbox's graphical desktop (an X display, %dx%d pixels as you see it) with the mouse and keyboard, and see it in screenshots.

- Take a screenshot first to see what is on the screen; every action except cursor_position answers with a new screenshot, taken a moment after the action.
- Coordinates are [x, y] pixels from the top-left corner of the screenshot; x is below %d and y below %d.
- Click in the middle of what you aim at. Typing goes to the focused window: click into it first. Use key for keys and shortcuts ("Return", "ctrl+a", "alt+F4").
- The desktop starts on first use with an empty screen. Start programs from bash in the background on display :1, e.g. "DISPLAY=:1 xterm &" or "DISPLAY=:1 python3 app.py &", then take a screenshot.
- Prefer bash and the file tools for anything they can do: the desktop is for graphical programs and what can only be seen.`

// Spec describes the computer tool: its function form, and its native
// form for models with native computer use, both in the scaled size.
func (c ComputerTool) Spec() llm.Tool {
	w, h := c.scaling().size()
	s := spec(NameComputer, fmt.Sprintf(computerDescription, w, h, w, h), computerSchema)
	s.Native = &llm.NativeTool{Kind: llm.NativeKindComputer, DisplayWidth: w, DisplayHeight: h, DisplayNumber: displayNumber()}
	return s
}

// displayNumber is the number of guest.Display (":1").
func displayNumber() int {
	var n int
	_, _ = fmt.Sscanf(strings.TrimPrefix(guest.Display, ":"), "%d", &n)
	return n
}

type computerInput struct {
	Action          string   `json:"action"`
	Coordinate      *[2]int  `json:"coordinate"`
	StartCoordinate *[2]int  `json:"start_coordinate"`
	Text            *string  `json:"text"`
	ScrollDirection string   `json:"scroll_direction"`
	ScrollAmount    int      `json:"scroll_amount"`
	Duration        *float64 `json:"duration"`
}

// given returns the optional fields the input has.
func (in computerInput) given() []string {
	fields := []struct {
		name string
		ok   bool
	}{
		{"coordinate", in.Coordinate != nil}, {"start_coordinate", in.StartCoordinate != nil},
		{"text", in.Text != nil}, {"scroll_direction", in.ScrollDirection != ""},
		{"scroll_amount", in.ScrollAmount != 0}, {"duration", in.Duration != nil},
	}
	var out []string
	for _, f := range fields {
		if f.ok {
			out = append(out, f.name)
		}
	}
	return out
}

// Run performs one action on the desktop and reports it, with a
// screenshot for every action but cursor_position.
func (c ComputerTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in computerInput
	if r, ok := decodeInput(NameComputer, computerSchema, input, &in); !ok {
		return r, nil
	}
	sc := c.scaling()
	a, msg := sc.action(in)
	if msg != "" {
		return errorf("computer: %s", msg), nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	res, err := g.Desktop(ctx, a)
	if err != nil {
		return slowFailure(ctx, NameComputer, err)
	}
	text := sc.describe(in, res) + sc.mismatch(res)
	switch in.Action {
	case "screenshot":
		return shotResult(text, res.PNG), nil
	case "cursor_position":
		return Result{Text: text}, nil
	}
	return sc.after(ctx, g, in.Action, text)
}

// after takes the screenshot that shows an action's effect, once the
// screen has had a moment to change.
func (sc scaling) after(ctx context.Context, g *guest.Client, action, text string) (Result, error) {
	if action != "wait" {
		select {
		case <-time.After(settleDelay):
		case <-ctx.Done():
			return Result{}, fmt.Errorf("%s: %w", NameComputer, context.Cause(ctx))
		}
	}
	res, err := g.Desktop(ctx, sc.shot(guest.DesktopAction{Action: "screenshot"}))
	if err != nil {
		r, err := slowFailure(ctx, NameComputer, err)
		if err != nil {
			return Result{}, err
		}
		return Result{Text: text + "\nNo screenshot after it: " + r.Text}, nil
	}
	return shotResult(text, res.PNG), nil
}

func shotResult(text string, png []byte) Result {
	if len(png) == 0 {
		return Result{Text: text + "\nThe guest sent no screenshot."}
	}
	return Result{Text: text, Images: []llm.Image{{MediaType: "image/png", Data: png}}}
}

// action checks the input against its action's rule and the screen, and
// builds the guest's action; msg says what is wrong with the input.
func (sc scaling) action(in computerInput) (a guest.DesktopAction, msg string) {
	rule := actionRules[in.Action]
	for _, f := range rule.need {
		if !slices.Contains(in.given(), f) {
			return a, fmt.Sprintf("%s needs %s", in.Action, f)
		}
	}
	for _, f := range in.given() {
		if !slices.Contains(rule.need, f) && !slices.Contains(rule.may, f) {
			return a, fmt.Sprintf("%s does not take %s%s", in.Action, f, hint(in.Action, f))
		}
	}
	if in.Text != nil && (*in.Text == "" || in.Action != "type" && strings.TrimSpace(*in.Text) == "") {
		return a, "text is empty"
	}
	a = guest.DesktopAction{Action: in.Action, ScrollDirection: in.ScrollDirection, ScrollAmount: in.ScrollAmount}
	if in.Text != nil {
		a.Text = *in.Text
	}
	if in.Duration != nil {
		a.DurationMS = int64(math.Round(*in.Duration * 1000))
	}
	if a.Coordinate, msg = sc.toScreen("coordinate", in.Coordinate); msg != "" {
		return a, msg
	}
	if a.Start, msg = sc.toScreen("start_coordinate", in.StartCoordinate); msg != "" {
		return a, msg
	}
	if in.Action == "screenshot" {
		a = sc.shot(a)
	}
	return a, ""
}

// hint suggests the way to do what a misplaced field meant.
func hint(action, field string) string {
	switch {
	case field == "coordinate" && (action == "left_mouse_down" || action == "left_mouse_up"):
		return "; move the pointer first with mouse_move"
	case field == "coordinate" && (action == "type" || action == "key"):
		return "; click where the text should go first"
	}
	return ""
}

// shot asks a for a screenshot in the model's size.
func (sc scaling) shot(a guest.DesktopAction) guest.DesktopAction {
	a.Screenshot = true
	if sc.scaled() {
		a.ScaleWidth, a.ScaleHeight = sc.w, sc.h
	}
	return a
}

// describe is the text of an action done, in the model's coordinates.
func (sc scaling) describe(in computerInput, res guest.DesktopResult) string {
	x, y := sc.fromScreen(res.Cursor)
	switch in.Action {
	case "screenshot":
		return fmt.Sprintf("Screenshot (%dx%d).", sc.w, sc.h)
	case "cursor_position":
		return fmt.Sprintf("X=%d,Y=%d", x, y)
	case "key":
		return fmt.Sprintf("Pressed %s.", *in.Text)
	case "hold_key":
		return fmt.Sprintf("Held %s for %gs.", *in.Text, *in.Duration)
	case "type":
		return fmt.Sprintf("Typed %d characters.", len([]rune(*in.Text)))
	case "wait":
		return fmt.Sprintf("Waited %gs.", *in.Duration)
	case "scroll":
		return fmt.Sprintf("Scrolled %s at (%d, %d).", in.ScrollDirection, x, y)
	}
	return fmt.Sprintf("%s done; the pointer is at (%d, %d).", in.Action, x, y)
}

// mismatch notes a screen of another size than the tool was told of,
// which puts clicks off target: a configuration error.
func (sc scaling) mismatch(res guest.DesktopResult) string {
	if res.Width == 0 || res.Width == sc.screenW && res.Height == sc.screenH {
		return ""
	}
	return fmt.Sprintf("\nWarning: the screen is %dx%d, not the %dx%d this tool was set up for; positions may be off.",
		res.Width, res.Height, sc.screenW, sc.screenH)
}

// scaling maps between the screen's pixels and the model's.
type scaling struct {
	screenW, screenH int // the screen
	w, h             int // what the model sees
}

func (c ComputerTool) scaling() scaling {
	sw, sh := c.Width, c.Height
	if sw <= 0 || sh <= 0 {
		sw, sh = guest.DefaultDisplayWidth, guest.DefaultDisplayHeight
	}
	w, h := ScaledSize(sw, sh)
	return scaling{screenW: sw, screenH: sh, w: w, h: h}
}

func (sc scaling) size() (int, int) { return sc.w, sc.h }
func (sc scaling) scaled() bool     { return sc.w != sc.screenW || sc.h != sc.screenH }

// toScreen maps the model's point to the screen's, refusing one outside
// the screen the model sees. A nil point stays nil.
func (sc scaling) toScreen(field string, p *[2]int) (*guest.Point, string) {
	if p == nil {
		return nil, ""
	}
	x, y := p[0], p[1]
	if x < 0 || y < 0 || x >= sc.w || y >= sc.h {
		return nil, fmt.Sprintf("%s [%d, %d] is off the screen: x must be 0 to %d and y 0 to %d", field, x, y, sc.w-1, sc.h-1)
	}
	return &guest.Point{X: mapAxis(x, sc.w, sc.screenW), Y: mapAxis(y, sc.h, sc.screenH)}, ""
}

// fromScreen maps a screen point to the model's.
func (sc scaling) fromScreen(p guest.Point) (x, y int) {
	return mapAxis(p.X, sc.screenW, sc.w), mapAxis(p.Y, sc.screenH, sc.h)
}

// mapAxis maps v of an axis from pixels long to one to pixels long,
// rounding to the nearest pixel within it.
func mapAxis(v, from, to int) int {
	if from == to {
		return min(max(v, 0), to-1)
	}
	return min(max(int(math.Round(float64(v)*float64(to)/float64(from))), 0), to-1)
}

// scaleTargets are the screen sizes Anthropic recommends for computer use:
// XGA, WXGA and FWXGA.
var scaleTargets = [][2]int{{1024, 768}, {1280, 800}, {1366, 768}}

// ScaledSize is the size a width x height screen is shown to the model at,
// as Anthropic's reference implementation chooses it: the recommended size
// of the same aspect ratio (within 0.02), or else of the nearest one with
// the aspect ratio kept. A screen no larger than that size is not scaled.
func ScaledSize(width, height int) (int, int) {
	ratio := float64(width) / float64(height)
	best := scaleTargets[0]
	for _, t := range scaleTargets[1:] {
		if math.Abs(aspect(t)-ratio) < math.Abs(aspect(best)-ratio) {
			best = t
		}
	}
	tw, th := best[0], best[1]
	switch {
	case width <= tw && height <= th:
		return width, height
	case math.Abs(aspect(best)-ratio) < 0.02 && width >= tw && height >= th:
		return tw, th
	}
	f := math.Min(float64(tw)/float64(width), float64(th)/float64(height))
	return max(int(math.Round(float64(width)*f)), 1), max(int(math.Round(float64(height)*f)), 1)
}

func aspect(t [2]int) float64 { return float64(t[0]) / float64(t[1]) }

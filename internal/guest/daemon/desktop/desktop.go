// Package desktop owns the sandbox's graphical desktop: the X display and
// the programs on it (window manager, VNC, noVNC) as services for the
// guest's supervisor, and the actions the host performs on it — input
// through xdotool, which maps any text to key events, and screenshots read
// straight from the X server (see screen.go), several times faster than
// running a screenshot program.
package desktop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// typeChunk is how many characters one xdotool type call types, so a long
// text can be abandoned between chunks when the caller goes away.
const typeChunk = 200

// xdoTimeout bounds one xdotool call.
const xdoTimeout = time.Minute

// Supervisor is what the desktop needs of the guest's service supervisor.
type Supervisor interface {
	// Ensure makes a service (guest.ServiceDesktop) run and answer.
	Ensure(ctx context.Context, name string) error
	// Doubt makes the next Ensure probe the service however recently it
	// answered.
	Doubt(name string)
}

// Config configures a Desktop.
type Config struct {
	// Width and Height are the screen's size, in pixels.
	Width, Height int
	// Services starts the desktop's programs (see Services).
	Services Supervisor
	// Environ returns the environment xdotool runs in.
	Environ func() ([]string, error)
	Log     *slog.Logger
}

// Desktop performs the host's actions on the sandbox's display, starting
// the desktop's programs first if needed.
type Desktop struct {
	cfg Config
	log *slog.Logger
	// turn serializes actions, so one's mouse-down is not another's drag.
	turn chan struct{}
}

// New returns the desktop of cfg; nothing starts until it is first used.
func New(cfg Config) *Desktop {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Desktop{cfg: cfg, log: cfg.Log, turn: make(chan struct{}, 1)}
}

// Start ensures the desktop's programs and describes the display.
func (d *Desktop) Start(ctx context.Context) (guest.DesktopInfo, error) {
	if err := d.cfg.Services.Ensure(ctx, guest.ServiceDesktop); err != nil {
		return guest.DesktopInfo{}, err
	}
	var x *xconn
	err := d.withX(ctx, func() (err error) {
		if x, err = dialX(ctx, guest.Display); err != nil {
			return noX(err)
		}
		return nil
	})
	if err != nil {
		return guest.DesktopInfo{}, err
	}
	defer x.Close()
	return guest.DesktopInfo{Display: guest.Display, Width: x.w, Height: x.h}, nil
}

// Act validates and performs one action, then reports the screen. Errors
// are *guest.Error.
func (d *Desktop) Act(ctx context.Context, a guest.DesktopAction) (guest.DesktopResult, error) {
	if err := validate(a, d.cfg.Width, d.cfg.Height); err != nil {
		return guest.DesktopResult{}, err
	}
	if err := d.cfg.Services.Ensure(ctx, guest.ServiceDesktop); err != nil {
		return guest.DesktopResult{}, err
	}
	select {
	case d.turn <- struct{}{}:
		defer func() { <-d.turn }()
	case <-ctx.Done():
		return guest.DesktopResult{}, guest.Errorf(guest.CodeService, "desktop: waiting for another action: %v", context.Cause(ctx))
	}
	if err := d.withX(ctx, func() error { return d.perform(ctx, a) }); err != nil {
		return guest.DesktopResult{}, err
	}
	var res guest.DesktopResult
	err := d.withX(ctx, func() (err error) { res, err = d.observe(ctx, a); return err })
	return res, err
}

// errNoX marks a failure to reach the X server at all: nothing was done.
var errNoX = errors.New("X server unreachable")

// noX reports err, a failure to reach the X server.
func noX(err error) error {
	return fmt.Errorf("%w%w", guest.Errorf(guest.CodeService, "desktop: %v", err), errNoX)
}

// withX runs f, and once more after re-ensuring the desktop if f could not
// reach the X server: it may have died a moment ago, before the supervisor
// noticed.
func (d *Desktop) withX(ctx context.Context, f func() error) error {
	err := f()
	if !errors.Is(err, errNoX) {
		return err
	}
	d.log.Warn("desktop: X server unreachable; ensuring it and retrying", "err", err)
	d.cfg.Services.Doubt(guest.ServiceDesktop)
	if err := d.cfg.Services.Ensure(ctx, guest.ServiceDesktop); err != nil {
		return err
	}
	return f()
}

// perform carries out a validated action.
func (d *Desktop) perform(ctx context.Context, a guest.DesktopAction) error {
	dur := time.Duration(a.DurationMS) * time.Millisecond
	switch a.Action {
	case "screenshot", "cursor_position":
		return nil
	case "wait":
		return pause(ctx, dur)
	case "type":
		return d.typeText(ctx, a.Text)
	case "key":
		return d.xdo(ctx, append([]string{"key", "--delay", "12", "--"}, strings.Fields(a.Text)...)...)
	case "hold_key":
		return d.holdKey(ctx, a.Text, dur)
	}
	return d.xdo(ctx, mouseArgs(a)...)
}

// mouseArgs is the xdotool command line of a mouse action: move, press any
// modifiers, act, release the modifiers.
func mouseArgs(a guest.DesktopAction) []string {
	var args, down, up []string
	if a.Text != "" {
		down, up = []string{"keydown", a.Text}, []string{"keyup", a.Text}
	}
	if a.Action == "left_click_drag" {
		args = append(moveArgs(a.Start), down...)
		// A press, a move in two steps and a release, with pauses, so that
		// applications see a drag rather than a click.
		mid := midpoint(a.Start, *a.Coordinate)
		args = append(args, "mousedown", "1", "sleep", "0.05")
		args = append(args, append(moveArgs(mid), "sleep", "0.05")...)
		args = append(args, append(moveArgs(a.Coordinate), "sleep", "0.05", "mouseup", "1")...)
		return append(args, up...)
	}
	args = moveArgs(a.Coordinate)
	switch a.Action {
	case "mouse_move":
		return args
	case "left_mouse_down":
		return append(args, "mousedown", "1")
	case "left_mouse_up":
		return append(args, "mouseup", "1")
	}
	button, repeat, delay := clickOf(a)
	args = append(args, down...)
	args = append(args, "click", "--repeat", strconv.Itoa(repeat), "--delay", delay, button)
	return append(args, up...)
}

// clickOf returns the button, click count and delay between clicks (ms)
// of a click or scroll action.
func clickOf(a guest.DesktopAction) (string, int, string) {
	switch a.Action {
	case "right_click":
		return "3", 1, "80"
	case "middle_click":
		return "2", 1, "80"
	case "double_click":
		return "1", 2, "80"
	case "triple_click":
		return "1", 3, "80"
	case "scroll":
		n := a.ScrollAmount
		if n == 0 {
			n = 3
		}
		return scrollButtons[a.ScrollDirection], n, "30"
	}
	return "1", 1, "80"
}

func moveArgs(p *guest.Point) []string {
	if p == nil {
		return nil
	}
	return []string{"mousemove", strconv.Itoa(p.X), strconv.Itoa(p.Y)}
}

// midpoint is halfway from start (nil: the end itself) to end.
func midpoint(start *guest.Point, end guest.Point) *guest.Point {
	if start == nil {
		return &end
	}
	return &guest.Point{X: (start.X + end.X) / 2, Y: (start.Y + end.Y) / 2}
}

// typeText types text literally, in chunks.
func (d *Desktop) typeText(ctx context.Context, text string) error {
	runes := []rune(text)
	for len(runes) > 0 {
		n := min(typeChunk, len(runes))
		if err := ctx.Err(); err != nil {
			return guest.Errorf(guest.CodeService, "type: stopped after an unknown part: %v", context.Cause(ctx))
		}
		if err := d.xdo(ctx, "type", "--delay", "12", "--", string(runes[:n])); err != nil {
			return err
		}
		runes = runes[n:]
	}
	return nil
}

// holdKey presses keys for dur; they are released even if ctx ends first.
func (d *Desktop) holdKey(ctx context.Context, keys string, dur time.Duration) error {
	if err := d.xdo(ctx, "keydown", keys); err != nil {
		return err
	}
	slept := pause(ctx, dur)
	if err := d.xdo(context.WithoutCancel(ctx), "keyup", keys); err != nil {
		return err
	}
	return slept
}

// pause waits d for an action, unless the caller goes away first.
func pause(ctx context.Context, d time.Duration) error {
	if err := supervise.Sleep(ctx, d); err != nil {
		return guest.Errorf(guest.CodeService, "desktop: interrupted: %v", err)
	}
	return nil
}

// xdo runs one xdotool command line on the display. It is not cut short
// when ctx ends (a key would stay pressed), only bounded by xdoTimeout.
func (d *Desktop) xdo(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), xdoTimeout)
	defer cancel()
	env, err := d.cfg.Environ()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "xdotool", args...)
	var out bytes.Buffer
	cmd.Env, cmd.Stdout, cmd.Stderr = append(env, "DISPLAY="+guest.Display), &out, &out
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	msg := strings.TrimSpace(out.String())
	if strings.Contains(msg, "No such key name") {
		return guest.Errorf(guest.CodeBadRequest, "%s: %s; use X key names like Return, Tab, ctrl+s, shift+Tab, Page_Down, F5, super", args[0], firstLine(msg))
	}
	if err != nil && strings.Contains(msg, "Can't open display") {
		return noX(fmt.Errorf("xdotool: %s", firstLine(msg)))
	}
	if err != nil {
		return guest.Errorf(guest.CodeService, "desktop: xdotool %s: %v: %s", args[0], err, msg)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// observe reports the screen size and pointer, with a screenshot if the
// action asks for one.
func (d *Desktop) observe(ctx context.Context, a guest.DesktopAction) (guest.DesktopResult, error) {
	x, err := dialX(ctx, guest.Display)
	if err != nil {
		return guest.DesktopResult{}, noX(err)
	}
	defer x.Close()
	res := guest.DesktopResult{Width: x.w, Height: x.h}
	if res.Cursor, err = x.pointer(); err != nil {
		return res, guest.Errorf(guest.CodeService, "desktop: %v", err)
	}
	if a.Action != "screenshot" && !a.Screenshot {
		return res, nil
	}
	img, err := x.screenshot()
	if err != nil {
		return res, guest.Errorf(guest.CodeService, "desktop: %v", err)
	}
	// The pointer is a nicety: a screenshot without it is still an answer.
	if c, err := x.cursor(); err == nil && c != nil {
		drawCursor(img, c)
	}
	if a.ScaleWidth > 0 {
		img = scaleDown(img, a.ScaleWidth, a.ScaleHeight)
	}
	res.PNG, err = encodePNG(img)
	return res, err
}

// encodePNG favours speed: on screen content the best compression saves
// about a tenth of the size for half again the time.
func encodePNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, guest.Errorf(guest.CodeInternal, "desktop: encode screenshot: %v", err)
	}
	return buf.Bytes(), nil
}

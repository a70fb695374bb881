package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The desktop: input through xdotool, which maps any text to key events,
// and screenshots read straight from the X server (see screen.go), which is
// several times faster than running a screenshot program.

// typeChunk is how many characters one xdotool type call types, so a long
// text can be abandoned between chunks when the caller goes away.
const typeChunk = 200

// xdoTimeout bounds one xdotool call.
const xdoTimeout = time.Minute

func (s *Server) desktopStart(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		var empty struct{}
		if err := decode(w, r, &empty); err != nil {
			s.writeError(w, err)
			return
		}
	}
	info, err := s.startDesktop(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) desktopAction(w http.ResponseWriter, r *http.Request) {
	var a DesktopAction
	if err := decode(w, r, &a); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.act(r.Context(), a)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// startDesktop ensures the desktop stack and describes the display.
func (s *Server) startDesktop(ctx context.Context) (DesktopInfo, error) {
	if err := s.ensure(ctx, ServiceDesktop); err != nil {
		return DesktopInfo{}, err
	}
	var x *xconn
	err := s.withX(ctx, func() (err error) {
		if x, err = dialX(ctx, Display); err != nil {
			return noX(err)
		}
		return nil
	})
	if err != nil {
		return DesktopInfo{}, err
	}
	defer x.Close()
	return DesktopInfo{Display: Display, Width: x.w, Height: x.h}, nil
}

// act validates and performs one action, then reports the screen.
func (s *Server) act(ctx context.Context, a DesktopAction) (DesktopResult, error) {
	if err := validate(a, s.cfg.DisplayWidth, s.cfg.DisplayHeight); err != nil {
		return DesktopResult{}, err
	}
	if err := s.ensure(ctx, ServiceDesktop); err != nil {
		return DesktopResult{}, err
	}
	select {
	case s.desk <- struct{}{}:
		defer func() { <-s.desk }()
	case <-ctx.Done():
		return DesktopResult{}, errorf(CodeService, "desktop: waiting for another action: %v", context.Cause(ctx))
	}
	if err := s.withX(ctx, func() error { return s.perform(ctx, a) }); err != nil {
		return DesktopResult{}, err
	}
	var res DesktopResult
	err := s.withX(ctx, func() (err error) { res, err = s.observe(ctx, a); return err })
	return res, err
}

// errNoX marks a failure to reach the X server at all: nothing was done.
var errNoX = errors.New("X server unreachable")

// noX reports err, a failure to reach the X server.
func noX(err error) error {
	return fmt.Errorf("%w%w", errorf(CodeService, "desktop: %v", err), errNoX)
}

// withX runs f, and once more after re-ensuring the desktop if f could not
// reach the X server: it may have died a moment ago, before the supervisor
// noticed.
func (s *Server) withX(ctx context.Context, f func() error) error {
	err := f()
	if !errors.Is(err, errNoX) {
		return err
	}
	s.log.Warn("desktop: X server unreachable; ensuring it and retrying", "err", err)
	s.sup.doubt(ServiceDesktop)
	if err := s.ensure(ctx, ServiceDesktop); err != nil {
		return err
	}
	return f()
}

// perform carries out a validated action.
func (s *Server) perform(ctx context.Context, a DesktopAction) error {
	d := time.Duration(a.DurationMS) * time.Millisecond
	switch a.Action {
	case "screenshot", "cursor_position":
		return nil
	case "wait":
		return pause(ctx, d)
	case "type":
		return s.typeText(ctx, a.Text)
	case "key":
		return s.xdo(ctx, append([]string{"key", "--delay", "12", "--"}, strings.Fields(a.Text)...)...)
	case "hold_key":
		return s.holdKey(ctx, a.Text, d)
	}
	return s.xdo(ctx, mouseArgs(a)...)
}

// mouseArgs is the xdotool command line of a mouse action: move, press any
// modifiers, act, release the modifiers.
func mouseArgs(a DesktopAction) []string {
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
func clickOf(a DesktopAction) (string, int, string) {
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

func moveArgs(p *Point) []string {
	if p == nil {
		return nil
	}
	return []string{"mousemove", strconv.Itoa(p.X), strconv.Itoa(p.Y)}
}

// midpoint is halfway from start (nil: the end itself) to end.
func midpoint(start *Point, end Point) *Point {
	if start == nil {
		return &end
	}
	return &Point{X: (start.X + end.X) / 2, Y: (start.Y + end.Y) / 2}
}

// typeText types text literally, in chunks.
func (s *Server) typeText(ctx context.Context, text string) error {
	runes := []rune(text)
	for len(runes) > 0 {
		n := min(typeChunk, len(runes))
		if err := ctx.Err(); err != nil {
			return errorf(CodeService, "type: stopped after an unknown part: %v", context.Cause(ctx))
		}
		if err := s.xdo(ctx, "type", "--delay", "12", "--", string(runes[:n])); err != nil {
			return err
		}
		runes = runes[n:]
	}
	return nil
}

// holdKey presses keys for d; they are released even if ctx ends first.
func (s *Server) holdKey(ctx context.Context, keys string, d time.Duration) error {
	if err := s.xdo(ctx, "keydown", keys); err != nil {
		return err
	}
	slept := pause(ctx, d)
	if err := s.xdo(context.WithoutCancel(ctx), "keyup", keys); err != nil {
		return err
	}
	return slept
}

// pause waits d for an action, unless the caller goes away first.
func pause(ctx context.Context, d time.Duration) error {
	if err := sleepCtx(ctx, d); err != nil {
		return errorf(CodeService, "desktop: interrupted: %v", err)
	}
	return nil
}

// xdo runs one xdotool command line on the display. It is not cut short
// when ctx ends (a key would stay pressed), only bounded by xdoTimeout.
func (s *Server) xdo(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), xdoTimeout)
	defer cancel()
	env, err := s.env(nil)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "xdotool", args...)
	var out bytes.Buffer
	cmd.Env, cmd.Stdout, cmd.Stderr = append(env, "DISPLAY="+Display), &out, &out
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	msg := strings.TrimSpace(out.String())
	if strings.Contains(msg, "No such key name") {
		return errorf(CodeBadRequest, "%s: %s; use X key names like Return, Tab, ctrl+s, shift+Tab, Page_Down, F5, super", args[0], firstLine(msg))
	}
	if err != nil && strings.Contains(msg, "Can't open display") {
		return noX(fmt.Errorf("xdotool: %s", firstLine(msg)))
	}
	if err != nil {
		return errorf(CodeService, "desktop: xdotool %s: %v: %s", args[0], err, msg)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// observe reports the screen size and pointer, with a screenshot if the
// action asks for one.
func (s *Server) observe(ctx context.Context, a DesktopAction) (DesktopResult, error) {
	x, err := dialX(ctx, Display)
	if err != nil {
		return DesktopResult{}, noX(err)
	}
	defer x.Close()
	res := DesktopResult{Width: x.w, Height: x.h}
	if res.Cursor, err = x.pointer(); err != nil {
		return res, errorf(CodeService, "desktop: %v", err)
	}
	if a.Action != "screenshot" && !a.Screenshot {
		return res, nil
	}
	img, err := x.screenshot()
	if err != nil {
		return res, errorf(CodeService, "desktop: %v", err)
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
		return nil, errorf(CodeInternal, "desktop: encode screenshot: %v", err)
	}
	return buf.Bytes(), nil
}

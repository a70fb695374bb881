package desktop

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/guest"
)

// Limits on desktop actions.
const (
	maxActionDuration = 100_000 // ms, for hold_key and wait
	maxActionText     = 64 << 10
	// maxTypeRunes bounds type: xdotool, with 12 ms between keystrokes,
	// types at most about 83 characters a second, so this takes about 36 s,
	// well within the client's two minutes for a desktop call.
	maxTypeRunes   = 3000
	maxScrollClick = 100
	maxKeys        = 100
)

// use says whether an action takes a field.
type use int

const (
	refused use = iota
	optional
	required
)

// actionSpec is what one action takes.
type actionSpec struct {
	coord, text use
	start       bool // left_click_drag's Start
	scroll      bool // ScrollDirection and ScrollAmount
	duration    bool
	// textIs names what Text means for the action, for messages.
	textIs string
}

var actionSpecs = map[string]actionSpec{
	"screenshot":      {},
	"cursor_position": {},
	"mouse_move":      {coord: required},
	"left_click":      {coord: optional, text: optional, textIs: "modifier keys"},
	"right_click":     {coord: optional, text: optional, textIs: "modifier keys"},
	"middle_click":    {coord: optional, text: optional, textIs: "modifier keys"},
	"double_click":    {coord: optional, text: optional, textIs: "modifier keys"},
	"triple_click":    {coord: optional, text: optional, textIs: "modifier keys"},
	"left_mouse_down": {coord: optional},
	"left_mouse_up":   {coord: optional},
	"left_click_drag": {coord: required, start: true, text: optional, textIs: "modifier keys"},
	"scroll":          {coord: optional, text: optional, scroll: true, textIs: "modifier keys"},
	"type":            {text: required, textIs: "the text to type"},
	"key":             {text: required, textIs: "keys"},
	"hold_key":        {text: required, duration: true, textIs: "keys"},
	"wait":            {duration: true},
}

var scrollButtons = map[string]string{"up": "4", "down": "5", "left": "6", "right": "7"}

// validate checks a for a w×h screen, with messages a model can act on.
func validate(a guest.DesktopAction, w, h int) error {
	spec, ok := actionSpecs[a.Action]
	if !ok {
		return guest.Errorf(guest.CodeBadRequest, "unknown desktop action %q; use one of: %s", a.Action, actionNames())
	}
	for _, check := range []func(guest.DesktopAction, actionSpec, int, int) error{
		checkPoints, checkText, checkScroll, checkDuration, checkScale,
	} {
		if err := check(a, spec, w, h); err != nil {
			return guest.Errorf(guest.CodeBadRequest, "%s: %v", a.Action, err)
		}
	}
	return nil
}

func actionNames() string {
	return "screenshot, cursor_position, mouse_move, left_click, right_click, middle_click, double_click, " +
		"triple_click, left_mouse_down, left_mouse_up, left_click_drag, scroll, type, key, hold_key, wait"
}

func checkPoints(a guest.DesktopAction, spec actionSpec, w, h int) error {
	switch {
	case a.Coordinate == nil && spec.coord == required:
		return fmt.Errorf("coordinate is required")
	case a.Coordinate != nil && spec.coord == refused:
		return fmt.Errorf("coordinate is not accepted (it is for mouse actions)")
	case a.Start != nil && !spec.start:
		return fmt.Errorf("start is only for left_click_drag")
	}
	for _, p := range []*guest.Point{a.Start, a.Coordinate} {
		if p != nil && (p.X < 0 || p.Y < 0 || p.X >= w || p.Y >= h) {
			return fmt.Errorf("point (%d, %d) is off the %dx%d screen: x must be 0..%d and y 0..%d", p.X, p.Y, w, h, w-1, h-1)
		}
	}
	return nil
}

func checkText(a guest.DesktopAction, spec actionSpec, _, _ int) error {
	switch {
	case a.Text == "" && spec.text == required:
		return fmt.Errorf("text (%s) is required", spec.textIs)
	case a.Text != "" && spec.text == refused:
		return fmt.Errorf("text is not accepted")
	case a.Text == "":
		return nil
	case len(a.Text) > maxActionText:
		return fmt.Errorf("text is %d bytes, over the %d allowed", len(a.Text), maxActionText)
	case !utf8.ValidString(a.Text) || strings.ContainsRune(a.Text, 0):
		return fmt.Errorf("text must be valid UTF-8 without NUL characters")
	}
	switch a.Action {
	case "type":
		if n := utf8.RuneCountInString(a.Text); n > maxTypeRunes {
			return fmt.Errorf("text is %d characters; type at most %d per action (split it, or write long text to a file with the shell)", n, maxTypeRunes)
		}
		return nil
	case "key":
		return checkKeys(a.Text, maxKeys)
	}
	return checkKeys(a.Text, 1) // one combination: hold_key's keys or a click's modifiers
}

// checkKeys checks xdotool key syntax: up to n space-separated combinations
// of key names joined by "+". Whether each name exists, xdotool tells.
func checkKeys(text string, n int) error {
	combos := strings.Fields(text)
	if len(combos) > n {
		if n == 1 {
			return fmt.Errorf("text must be one key combination such as \"ctrl+shift\", not %q", text)
		}
		return fmt.Errorf("at most %d key combinations per action", n)
	}
	for _, c := range combos {
		for _, k := range strings.Split(c, "+") {
			if k == "" || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
				return fmt.Errorf("bad key combination %q: use xdotool key names joined by '+', like \"ctrl+s\", \"Return\", \"shift+Tab\"", c)
			}
		}
	}
	return nil
}

func checkScroll(a guest.DesktopAction, spec actionSpec, _, _ int) error {
	if !spec.scroll {
		if a.ScrollDirection != "" || a.ScrollAmount != 0 {
			return fmt.Errorf("scroll_direction and scroll_amount are only for scroll")
		}
		return nil
	}
	if _, ok := scrollButtons[a.ScrollDirection]; !ok {
		return fmt.Errorf("scroll_direction must be up, down, left or right, not %q", a.ScrollDirection)
	}
	if a.ScrollAmount < 0 || a.ScrollAmount > maxScrollClick {
		return fmt.Errorf("scroll_amount must be 1..%d wheel clicks (0 means 3), not %d", maxScrollClick, a.ScrollAmount)
	}
	return nil
}

func checkDuration(a guest.DesktopAction, spec actionSpec, _, _ int) error {
	switch {
	case !spec.duration && a.DurationMS != 0:
		return fmt.Errorf("duration_ms is only for hold_key and wait")
	case spec.duration && (a.DurationMS <= 0 || a.DurationMS > maxActionDuration):
		return fmt.Errorf("duration_ms must be 1..%d (at most 100 seconds), not %d", maxActionDuration, a.DurationMS)
	}
	return nil
}

func checkScale(a guest.DesktopAction, _ actionSpec, _, _ int) error {
	switch {
	case a.ScaleWidth == 0 && a.ScaleHeight == 0:
		return nil
	case a.ScaleWidth <= 0 || a.ScaleHeight <= 0:
		return fmt.Errorf("scale_width and scale_height must both be positive, or both left out (got %dx%d)", a.ScaleWidth, a.ScaleHeight)
	}
	return nil
}

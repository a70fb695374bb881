package desktop

import (
	"errors"
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

// codeOf is the code of the guest error in err, if any.
func codeOf(err error) string {
	var e *guest.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func pt(x, y int) *guest.Point { return &guest.Point{X: x, Y: y} }

func TestDesktopActionValidation(t *testing.T) {
	long := strings.Repeat("x", maxTypeRunes+1)
	for _, tc := range []struct {
		name string
		a    guest.DesktopAction
		want string // substring of the error; "" means valid
	}{
		{"screenshot", guest.DesktopAction{Action: "screenshot"}, ""},
		{"scaled screenshot", guest.DesktopAction{Action: "screenshot", ScaleWidth: 512, ScaleHeight: 384}, ""},
		{"click here", guest.DesktopAction{Action: "left_click"}, ""},
		{"click there with shift", guest.DesktopAction{Action: "left_click", Coordinate: pt(10, 10), Text: "shift"}, ""},
		{"drag", guest.DesktopAction{Action: "left_click_drag", Start: pt(1, 1), Coordinate: pt(100, 100)}, ""},
		{"scroll", guest.DesktopAction{Action: "scroll", ScrollDirection: "down", ScrollAmount: 5}, ""},
		{"type", guest.DesktopAction{Action: "type", Text: "echo 'hi' > \"f\"\n-- ünïcødé"}, ""},
		{"type the most", guest.DesktopAction{Action: "type", Text: strings.Repeat("ü", maxTypeRunes)}, ""},
		{"key sequence", guest.DesktopAction{Action: "key", Text: "ctrl+a Return KP_Enter"}, ""},
		{"hold", guest.DesktopAction{Action: "hold_key", Text: "shift", DurationMS: 500}, ""},
		{"wait", guest.DesktopAction{Action: "wait", DurationMS: 100_000}, ""},
		{"last pixel", guest.DesktopAction{Action: "mouse_move", Coordinate: pt(1023, 767)}, ""},

		{"unknown action", guest.DesktopAction{Action: "click"}, `unknown desktop action "click"`},
		{"empty action", guest.DesktopAction{}, "unknown desktop action"},
		{"move without coordinate", guest.DesktopAction{Action: "mouse_move"}, "coordinate is required"},
		{"x off screen", guest.DesktopAction{Action: "left_click", Coordinate: pt(1024, 0)}, "off the 1024x768 screen"},
		{"negative y", guest.DesktopAction{Action: "mouse_move", Coordinate: pt(5, -1)}, "off the"},
		{"drag start off screen", guest.DesktopAction{Action: "left_click_drag", Start: pt(0, 900), Coordinate: pt(1, 1)}, "off the"},
		{"drag without end", guest.DesktopAction{Action: "left_click_drag", Start: pt(0, 0)}, "coordinate is required"},
		{"start on a click", guest.DesktopAction{Action: "left_click", Start: pt(0, 0)}, "start is only for left_click_drag"},
		{"coordinate on type", guest.DesktopAction{Action: "type", Text: "a", Coordinate: pt(1, 1)}, "coordinate is not accepted"},
		{"type without text", guest.DesktopAction{Action: "type"}, "text (the text to type) is required"},
		{"key without text", guest.DesktopAction{Action: "key"}, "text (keys) is required"},
		{"text on screenshot", guest.DesktopAction{Action: "screenshot", Text: "x"}, "text is not accepted"},
		{"type too long", guest.DesktopAction{Action: "type", Text: long}, "type at most 3000 per action"},
		{"text too big", guest.DesktopAction{Action: "key", Text: strings.Repeat("a ", maxActionText)}, "over the 65536 allowed"},
		{"bad utf-8", guest.DesktopAction{Action: "type", Text: "a\xffb"}, "valid UTF-8"},
		{"NUL", guest.DesktopAction{Action: "type", Text: "a\x00b"}, "without NUL"},
		{"empty key part", guest.DesktopAction{Action: "key", Text: "ctrl+"}, `bad key combination "ctrl+"`},
		{"control char key", guest.DesktopAction{Action: "key", Text: "a\x01"}, "bad key combination"},
		{"two modifier combos", guest.DesktopAction{Action: "left_click", Text: "shift ctrl"}, "one key combination"},
		{"bad scroll direction", guest.DesktopAction{Action: "scroll", ScrollDirection: "sideways"}, "scroll_direction must be up, down, left or right"},
		{"missing scroll direction", guest.DesktopAction{Action: "scroll"}, "scroll_direction must be"},
		{"too much scroll", guest.DesktopAction{Action: "scroll", ScrollDirection: "up", ScrollAmount: 101}, "scroll_amount must be 1..100"},
		{"scroll fields on click", guest.DesktopAction{Action: "left_click", ScrollDirection: "up"}, "only for scroll"},
		{"wait without duration", guest.DesktopAction{Action: "wait"}, "duration_ms must be 1..100000"},
		{"wait too long", guest.DesktopAction{Action: "wait", DurationMS: 100_001}, "at most 100 seconds"},
		{"hold forever", guest.DesktopAction{Action: "hold_key", Text: "a", DurationMS: -5}, "duration_ms must be"},
		{"duration on click", guest.DesktopAction{Action: "left_click", DurationMS: 5}, "only for hold_key and wait"},
		{"half a scale", guest.DesktopAction{Action: "screenshot", ScaleWidth: 100}, "both be positive"},
		{"negative scale", guest.DesktopAction{Action: "screenshot", ScaleWidth: -1, ScaleHeight: 10}, "both be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(tc.a, 1024, 768)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || codeOf(err) != guest.CodeBadRequest || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want bad_request containing %q", err, tc.want)
			}
		})
	}
}

func TestMouseArgs(t *testing.T) {
	for _, tc := range []struct {
		a    guest.DesktopAction
		want string
	}{
		{guest.DesktopAction{Action: "mouse_move", Coordinate: pt(3, 4)}, "mousemove 3 4"},
		{guest.DesktopAction{Action: "left_click"}, "click --repeat 1 --delay 80 1"},
		{guest.DesktopAction{Action: "right_click", Coordinate: pt(1, 2), Text: "ctrl+shift"},
			"mousemove 1 2 keydown ctrl+shift click --repeat 1 --delay 80 3 keyup ctrl+shift"},
		{guest.DesktopAction{Action: "triple_click"}, "click --repeat 3 --delay 80 1"},
		{guest.DesktopAction{Action: "left_mouse_down", Coordinate: pt(7, 8)}, "mousemove 7 8 mousedown 1"},
		{guest.DesktopAction{Action: "left_mouse_up"}, "mouseup 1"},
		{guest.DesktopAction{Action: "scroll", ScrollDirection: "left"}, "click --repeat 3 --delay 30 6"},
		{guest.DesktopAction{Action: "scroll", ScrollDirection: "down", ScrollAmount: 10, Coordinate: pt(5, 5)}, "mousemove 5 5 click --repeat 10 --delay 30 5"},
		{guest.DesktopAction{Action: "left_click_drag", Start: pt(0, 0), Coordinate: pt(10, 20), Text: "alt"},
			"mousemove 0 0 keydown alt mousedown 1 sleep 0.05 mousemove 5 10 sleep 0.05 mousemove 10 20 sleep 0.05 mouseup 1 keyup alt"},
	} {
		if got := strings.Join(mouseArgs(tc.a), " "); got != tc.want {
			t.Errorf("%s: xdotool %s, want %s", tc.a.Action, got, tc.want)
		}
	}
}

func TestScaleDownAveragesAndNeverEnlarges(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 4, 2))
	for x := range 4 {
		for y := range 2 {
			if (x+y)%2 == 0 {
				img.Set(x, y, color.RGBA{200, 100, 0, 255})
			} else {
				img.Set(x, y, color.RGBA{0, 0, 50, 255})
			}
		}
	}
	small := scaleDown(img, 2, 1)
	if small.Rect.Dx() != 2 || small.Rect.Dy() != 1 {
		t.Fatalf("size %v, want 2x1", small.Rect)
	}
	if got, want := small.RGBAAt(1, 0), (color.RGBA{100, 50, 25, 255}); got != want {
		t.Errorf("pixel %v, want the average %v", got, want)
	}
	if same := scaleDown(img, 8, 8); same != img {
		t.Errorf("enlarged to %v", same.Rect)
	}
	if odd := scaleDown(img, 3, 5); odd.Rect.Dx() != 3 || odd.Rect.Dy() != 2 {
		t.Errorf("size %v, want 3x2 (height kept)", odd.Rect)
	}
}

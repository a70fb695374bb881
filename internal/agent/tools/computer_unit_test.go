package tools

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

func TestScaledSize(t *testing.T) {
	cases := []struct{ w, h, wantW, wantH int }{
		{1024, 768, 1024, 768}, // XGA stays
		{1920, 1080, 1366, 768},
		{1280, 800, 1280, 800},
		{2560, 1600, 1280, 800},
		{2048, 1536, 1024, 768},
		{1440, 900, 1280, 800},
		{1600, 900, 1366, 768},
		{7680, 4320, 1366, 768},
		{1280, 720, 1280, 720}, // below FWXGA: never scaled up
		{800, 600, 800, 600},
		{320, 200, 320, 200},
		{1280, 1024, 960, 768}, // 5:4 fits in XGA, its ratio kept
		{800, 1280, 480, 768},  // portrait
	}
	for _, c := range cases {
		if w, h := ScaledSize(c.w, c.h); w != c.wantW || h != c.wantH {
			t.Errorf("ScaledSize(%d, %d) = %dx%d, want %dx%d", c.w, c.h, w, h, c.wantW, c.wantH)
		}
	}
}

func TestCoordinateMapping(t *testing.T) {
	sc := ComputerTool{Width: 1920, Height: 1080}.scaling()
	cases := []struct {
		in   [2]int
		want guest.Point
	}{
		{[2]int{0, 0}, guest.Point{}},
		{[2]int{683, 384}, guest.Point{X: 960, Y: 540}},
		{[2]int{1365, 767}, guest.Point{X: 1919, Y: 1079}},
		{[2]int{100, 700}, guest.Point{X: 141, Y: 984}}, // 140.55 and 984.375, rounded
	}
	for _, c := range cases {
		got, msg := sc.toScreen("coordinate", &c.in)
		if msg != "" || *got != c.want {
			t.Errorf("toScreen(%v) = %v %q, want %v", c.in, got, msg, c.want)
		}
	}
	if x, y := sc.fromScreen(guest.Point{X: 960, Y: 540}); x != 683 || y != 384 {
		t.Errorf("fromScreen(960, 540) = %d, %d, want 683, 384", x, y)
	}
	if x, y := sc.fromScreen(guest.Point{X: 5000, Y: -3}); x != 1365 || y != 0 {
		t.Errorf("fromScreen off the screen = %d, %d, want it clamped to 1365, 0", x, y)
	}
}

// TestCoordinateRoundTrip: every point the model can name comes back as
// itself when the pointer is put there, on every display size.
func TestCoordinateRoundTrip(t *testing.T) {
	for _, size := range [][2]int{{1024, 768}, {1920, 1080}, {2560, 1600}, {1280, 1024}, {7680, 4320}, {1366, 768}} {
		sc := ComputerTool{Width: size[0], Height: size[1]}.scaling()
		for x := 0; x < sc.w; x++ {
			y := x * (sc.h - 1) / (sc.w - 1)
			p, msg := sc.toScreen("coordinate", &[2]int{x, y})
			if msg != "" || p.X >= sc.screenW || p.Y >= sc.screenH {
				t.Fatalf("%v: toScreen(%d, %d) = %v %q", size, x, y, p, msg)
			}
			if bx, by := sc.fromScreen(*p); bx != x || by != y {
				t.Fatalf("%v: (%d, %d) -> %v -> (%d, %d)", size, x, y, *p, bx, by)
			}
		}
	}
}

// TestComputerInput: what the model may send for each action, and the
// guest action it becomes on a 1920x1080 screen (seen as 1366x768).
func TestComputerInput(t *testing.T) {
	tool := ComputerTool{Width: 1920, Height: 1080}
	ok := []struct {
		input string
		want  guest.DesktopAction
	}{
		{`{"action":"screenshot"}`, guest.DesktopAction{Action: "screenshot", Screenshot: true, ScaleWidth: 1366, ScaleHeight: 768}},
		{`{"action":"left_click","coordinate":[683,384]}`, guest.DesktopAction{Action: "left_click", Coordinate: &guest.Point{X: 960, Y: 540}}},
		{`{"action":"left_click"}`, guest.DesktopAction{Action: "left_click"}},
		{`{"action":"right_click","coordinate":[0,0],"text":"shift"}`, guest.DesktopAction{Action: "right_click", Coordinate: &guest.Point{}, Text: "shift"}},
		{`{"action":"left_click_drag","start_coordinate":[0,0],"coordinate":[683,384]}`,
			guest.DesktopAction{Action: "left_click_drag", Start: &guest.Point{}, Coordinate: &guest.Point{X: 960, Y: 540}}},
		{`{"action":"type","text":"hello world\n"}`, guest.DesktopAction{Action: "type", Text: "hello world\n"}},
		{`{"action":"type","text":" "}`, guest.DesktopAction{Action: "type", Text: " "}},
		{`{"action":"key","text":"ctrl+s"}`, guest.DesktopAction{Action: "key", Text: "ctrl+s"}},
		{`{"action":"hold_key","text":"shift","duration":1.5}`, guest.DesktopAction{Action: "hold_key", Text: "shift", DurationMS: 1500}},
		{`{"action":"wait","duration":2}`, guest.DesktopAction{Action: "wait", DurationMS: 2000}},
		{`{"action":"scroll","scroll_direction":"down","scroll_amount":5,"coordinate":[10,10]}`,
			guest.DesktopAction{Action: "scroll", ScrollDirection: "down", ScrollAmount: 5, Coordinate: &guest.Point{X: 14, Y: 14}}},
		{`{"action":"scroll","scroll_direction":"up","coordinate":null,"text":null}`, guest.DesktopAction{Action: "scroll", ScrollDirection: "up"}},
		{`{"action":"cursor_position"}`, guest.DesktopAction{Action: "cursor_position"}},
		{`{"action":"left_mouse_down"}`, guest.DesktopAction{Action: "left_mouse_down"}},
	}
	for _, c := range ok {
		var in computerInput
		if r, valid := decodeInput(NameComputer, computerSchema, json.RawMessage(c.input), &in); !valid {
			t.Errorf("%s: %s", c.input, r.Text)
			continue
		}
		got, msg := tool.scaling().action(in)
		if msg != "" || !sameAction(got, c.want) {
			t.Errorf("%s: %+v %q, want %+v", c.input, got, msg, c.want)
		}
	}
	bad := []struct{ input, want string }{
		{`{"action":"mouse_move"}`, "mouse_move needs coordinate"},
		{`{"action":"left_click_drag","start_coordinate":[1,1]}`, "left_click_drag needs coordinate"},
		{`{"action":"left_click","coordinate":[1366,10]}`, "coordinate [1366, 10] is off the screen: x must be 0 to 1365 and y 0 to 767"},
		{`{"action":"left_click","coordinate":[10,768]}`, "off the screen"},
		{`{"action":"left_click","coordinate":[-1,10]}`, "two whole numbers"},
		{`{"action":"left_click","coordinate":[1,2,3]}`, `field "coordinate" must be [x, y]`},
		{`{"action":"left_click","coordinate":"10,10"}`, `field "coordinate" must be [x, y]`},
		{`{"action":"left_click","coordinate":[1.5,2]}`, `must be [x, y]`},
		{`{"action":"left_click_drag","coordinate":[1,1],"start_coordinate":[2000,1]}`, "start_coordinate [2000, 1] is off the screen"},
		{`{"action":"type"}`, "type needs text"},
		{`{"action":"type","text":""}`, "text is empty"},
		{`{"action":"key","text":"  "}`, "text is empty"},
		{`{"action":"type","text":"hi","coordinate":[1,1]}`, "type does not take coordinate; click where the text should go first"},
		{`{"action":"left_mouse_down","coordinate":[1,1]}`, "move the pointer first with mouse_move"},
		{`{"action":"screenshot","text":"x"}`, "screenshot does not take text"},
		{`{"action":"wait"}`, "wait needs duration"},
		{`{"action":"wait","duration":101}`, `"duration" must be between 0 and 100`},
		{`{"action":"hold_key","text":"a"}`, "hold_key needs duration"},
		{`{"action":"scroll"}`, "scroll needs scroll_direction"},
		{`{"action":"scroll","scroll_direction":"sideways"}`, `"scroll_direction" must be one of`},
		{`{"action":"zoom"}`, `"action" must be one of "key", "hold_key"`},
		{`{"coordinate":[1,1]}`, `missing required field "action"`},
		{`{"action":"left_click","button":"left"}`, `unknown field "button"`},
	}
	for _, c := range bad {
		res, err := tool.Run(t.Context(), &Env{}, json.RawMessage(c.input))
		if err != nil || !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %+v %v; want an error result saying %q", c.input, res, err, c.want)
		}
	}
}

func sameAction(a, b guest.DesktopAction) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestComputerSpec(t *testing.T) {
	cases := []struct {
		tool ComputerTool
		w, h int
	}{
		{ComputerTool{}, 1024, 768},
		{ComputerTool{Width: 1920, Height: 1080}, 1366, 768},
		{ComputerTool{Width: 1280, Height: 800}, 1280, 800},
	}
	for _, c := range cases {
		s := c.tool.Spec()
		want := llm.NativeTool{Kind: llm.NativeKindComputer, DisplayWidth: c.w, DisplayHeight: c.h, DisplayNumber: 1}
		if s.Name != "computer" || s.Native == nil || *s.Native != want {
			t.Errorf("%+v: spec %s native %+v, want %+v", c.tool, s.Name, s.Native, want)
		}
		if size := strings.Contains(s.Description, "1366x768"); size != (c.w == 1366) {
			t.Errorf("%+v: the description does not give the scaled size: %s", c.tool, s.Description)
		}
		var sch struct {
			Properties map[string]struct {
				Type     string   `json:"type"`
				Enum     []string `json:"enum"`
				MinItems int      `json:"minItems"`
				MaxItems int      `json:"maxItems"`
				Items    *struct {
					Type string `json:"type"`
				} `json:"items"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(s.InputSchema, &sch); err != nil {
			t.Fatal(err)
		}
		coord := sch.Properties["coordinate"]
		if coord.Type != "array" || coord.Items == nil || coord.Items.Type != "integer" || coord.MinItems != 2 || coord.MaxItems != 2 {
			t.Errorf("coordinate schema %+v", coord)
		}
		if got := sch.Properties["action"].Enum; len(got) != 16 || len(sch.Required) != 1 || sch.Properties["duration"].Type != "number" {
			t.Errorf("schema %s", s.InputSchema)
		}
	}
}

func TestComputerDescribe(t *testing.T) {
	sc := ComputerTool{Width: 1920, Height: 1080}.scaling()
	res := guest.DesktopResult{Width: 1920, Height: 1080, Cursor: guest.Point{X: 960, Y: 540}}
	text := "ctrl+s"
	cases := []struct {
		in   computerInput
		want string
	}{
		{computerInput{Action: "cursor_position"}, "X=683,Y=384"},
		{computerInput{Action: "left_click"}, "left_click done; the pointer is at (683, 384)."},
		{computerInput{Action: "key", Text: &text}, "Pressed ctrl+s."},
		{computerInput{Action: "screenshot"}, "Screenshot (1366x768)."},
	}
	for _, c := range cases {
		if got := sc.describe(c.in, res); got != c.want {
			t.Errorf("%s: %q, want %q", c.in.Action, got, c.want)
		}
	}
	if got := sc.mismatch(guest.DesktopResult{Width: 1024, Height: 768}); !strings.Contains(got, "the screen is 1024x768, not the 1920x1080") {
		t.Errorf("mismatch = %q", got)
	}
	if got := sc.mismatch(res); got != "" {
		t.Errorf("mismatch of the right size = %q", got)
	}
}

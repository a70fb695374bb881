package tools_test

import (
	"bytes"
	"context"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// wantScreenshot checks res carries one PNG of w x h pixels.
func wantScreenshot(t *testing.T, res tools.Result, w, h int) {
	t.Helper()
	if res.IsError || len(res.Images) != 1 || res.Images[0].MediaType != "image/png" {
		t.Fatalf("want one PNG; IsError %v, %d images:\n%s", res.IsError, len(res.Images), res.Text)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(res.Images[0].Data))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if cfg.Width != w || cfg.Height != h {
		t.Errorf("screenshot is %dx%d, want %dx%d", cfg.Width, cfg.Height, w, h)
	}
}

// TestComputer drives the default 1024x768 desktop, which is shown as it
// is: a screenshot, then an xterm typed into by keyboard and mouse.
func TestComputer(t *testing.T) {
	env, dir := sandboxEnv(t)
	c := tools.ComputerTool{}
	res := call(t, env, c, obj{"action": "screenshot"})
	wantScreenshot(t, res, 1024, 768)
	wantText(t, res, false, "Screenshot (1024x768).")

	// Clicked and typed into once it is mapped: a window that exists but is
	// not shown yet (a loaded machine) gets neither the click nor the focus.
	sh(t, env, "(xterm -geometry 80x10+0+0 >/dev/null 2>&1 &) && for i in $(seq 300); do xdotool search --onlyvisible --class xterm >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1")
	t.Cleanup(func() { call(t, env, tools.BashTool{}, obj{"command": "pkill -x xterm; true"}) })
	wantScreenshot(t, call(t, env, c, obj{"action": "left_click", "coordinate": []int{100, 60}}), 1024, 768)
	res = call(t, env, c, obj{"action": "type", "text": "echo typed-by-the-agent > /workspace/" + dir + "/typed.txt"})
	wantText(t, res, false, "Typed")
	wantScreenshot(t, res, 1024, 768)
	wantScreenshot(t, call(t, env, c, obj{"action": "key", "text": "Return"}), 1024, 768)
	got := sh(t, env, "for i in $(seq 200); do test -s "+dir+"/typed.txt && break; sleep 0.1; done; cat "+dir+"/typed.txt")
	if !strings.Contains(got, "typed-by-the-agent") {
		t.Errorf("the typed command did not run: %s", got)
	}
	wantText(t, call(t, env, c, obj{"action": "key", "text": "NoSuchKey"}), true, "NoSuchKey")
}

// TestComputerScaled runs a sandbox with a 1920x1080 display: screenshots
// come at 1366x768, and coordinates in that space land on the right
// screen pixels and come back as they were.
func TestComputerScaled(t *testing.T) {
	env, _ := sandboxEnv(t) // the shared sandbox's driver makes the second one
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.Start(ctx, shared.driver, sandbox.Spec{Display: sandbox.Display{Width: 1920, Height: 1080}}, sandbox.Binding{JobID: "tools-test-display"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.WithoutCancel(ctx)) })
	env = &tools.Env{Guest: sb.Guest()}
	c := tools.ComputerTool{Width: 1920, Height: 1080}

	res := call(t, env, c, obj{"action": "screenshot"})
	wantScreenshot(t, res, 1366, 768)
	wantNot(t, res, "Warning")
	res = call(t, env, c, obj{"action": "mouse_move", "coordinate": []int{683, 384}})
	wantScreenshot(t, res, 1366, 768)
	wantText(t, res, false, "(683, 384)")
	wantText(t, call(t, env, c, obj{"action": "cursor_position"}), false, "X=683,Y=384")
	wantText(t, call(t, env, tools.BashTool{}, obj{"command": "xdotool getmouselocation"}), false, "x:960 y:540")

	call(t, env, c, obj{"action": "mouse_move", "coordinate": []int{1365, 767}})
	wantText(t, call(t, env, tools.BashTool{}, obj{"command": "xdotool getmouselocation"}), false, "x:1919 y:1079")
	wantText(t, call(t, env, c, obj{"action": "cursor_position"}), false, "X=1365,Y=767")
	wantText(t, call(t, env, c, obj{"action": "left_click", "coordinate": []int{1366, 0}}), true, "off the screen")
}

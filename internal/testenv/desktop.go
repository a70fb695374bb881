package testenv

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
)

// Desktop runs a desktop action in the sandbox of g, failing the test on
// an error.
func Desktop(t testing.TB, g *guest.Client, a guest.DesktopAction) guest.DesktopResult {
	t.Helper()
	res, err := g.Desktop(context.Background(), a)
	if err != nil {
		t.Fatalf("%s: %v", a.Action, err)
	}
	return res
}

// DecodePNG decodes a screenshot, failing the test if it is no PNG.
func DecodePNG(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	return img
}

// Await fails the test unless cond holds within d, polling it.
func Await(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DiffersIn reports whether screenshots a and b differ within r.
func DiffersIn(a, b image.Image, r image.Rectangle) bool {
	if a == nil || b == nil || a.Bounds() != b.Bounds() {
		return true
	}
	r = r.Intersect(a.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				return true
			}
		}
	}
	return false
}

// RFBGreeting opens noVNC's websockify through the guest's proxy (hc
// dials the guest) and checks that the VNC server's first message is an
// RFB greeting, within d.
func RFBGreeting(t testing.TB, hc *http.Client, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://sandbox/proxy/desktop/websockify", &websocket.DialOptions{
		HTTPClient: hc, Subprotocols: []string{"binary"},
		HTTPHeader: http.Header{"Origin": {"https://agentbox.example"}},
	})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer c.CloseNow()
	if _, msg, err := c.Read(ctx); err != nil || !strings.HasPrefix(string(msg), "RFB 003.") {
		t.Fatalf("first message %q, %v; want an RFB greeting", msg, err)
	}
}

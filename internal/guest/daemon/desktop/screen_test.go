package desktop

import (
	"context"
	"encoding/binary"
	"image/color"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

// fakeX serves a 4x2 screen the way Xvfb describes a 24-bit TrueColor one,
// answering the four requests the client makes; it sends an event before
// each reply to check that the client skips events.
func fakeX(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "X9")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			serveFakeX(c)
			c.Close()
		}
	}()
	return path
}

func serveFakeX(c net.Conn) {
	if _, err := io.ReadFull(c, make([]byte, 12)); err != nil {
		return
	}
	c.Write(fakeSetup())
	for {
		head := make([]byte, 4)
		if _, err := io.ReadFull(c, head); err != nil {
			return
		}
		if _, err := io.ReadFull(c, make([]byte, 4*int(le.Uint16(head[2:]))-4)); err != nil {
			return
		}
		event := make([]byte, 32)
		event[0] = 11 // KeymapNotify
		c.Write(event)
		c.Write(fakeReply(head[0], head[1]))
	}
}

func fakeSetup() []byte {
	var b []byte
	put32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	put16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	put32(1)            // release
	put32(0x200000)     // resource id base
	put32(0x1fffff)     // mask
	put32(0)            // motion buffer
	put16(4)            // vendor length
	put16(0xffff)       // max request length
	b = append(b, 1, 2) // screens, formats
	b = append(b, 0, 0, 32, 32, 8, 255, 0, 0, 0, 0)
	b = append(b, "test"...)
	b = append(b, 1, 1, 32, 0, 0, 0, 0, 0)   // depth 1 format
	b = append(b, 24, 32, 32, 0, 0, 0, 0, 0) // depth 24: 32 bits per pixel
	put32(0x100)                             // root
	put32(0x20)                              // colormap
	put32(0xffffff)
	put32(0)
	put32(0)
	put16(4) // width
	put16(2) // height
	put16(1)
	put16(1)
	put16(1)
	put16(1)
	put32(0x21)                // root visual
	b = append(b, 0, 0, 24, 1) // backing, save-unders, root depth, depths
	b = append(b, 24, 0, 1, 0, 0, 0, 0, 0)
	put32(0x21)
	b = append(b, 4, 8, 0, 1) // TrueColor, 8 bits, 256 entries
	put32(0xff0000)
	put32(0xff00)
	put32(0xff)
	put32(0)
	head := []byte{1, 0, 11, 0, 0, 0}
	head = binary.LittleEndian.AppendUint16(head, uint16(len(b)/4))
	return append(head, b...)
}

// fakeXFixes is the major opcode the fake server gives XFixes.
const fakeXFixes = 140

func fakeReply(opcode, minor byte) []byte {
	r := make([]byte, 32)
	r[0] = 1
	switch opcode {
	case 98: // QueryExtension: XFixes is there
		r[8], r[9] = 1, fakeXFixes
	case fakeXFixes:
		switch minor {
		case 0: // QueryVersion
			le.PutUint32(r[8:], 4)
		case 4: // GetCursorImage: 2x1 at (1,1), hot spot (0,0): opaque white, half-transparent black
			le.PutUint32(r[4:], 2)
			le.PutUint16(r[8:], 1)
			le.PutUint16(r[10:], 1)
			le.PutUint16(r[12:], 2)
			le.PutUint16(r[14:], 1)
			r = le.AppendUint32(r, 0xffffffff)
			r = le.AppendUint32(r, 0x80000000)
		default:
			r[0], r[1] = 0, 1
		}
	case 38: // QueryPointer
		le.PutUint16(r[16:], 3)
		le.PutUint16(r[18:], 1)
	case 16: // InternAtom
		le.PutUint32(r[8:], 77)
	case 20: // GetProperty: one 32-bit value
		r[1] = 32
		le.PutUint32(r[4:], 1)
		le.PutUint32(r[16:], 1)
		return append(r, 1, 2, 3, 4)
	case 73: // GetImage: pixel i is 0x00RRGGBB with R = i, G = 2i, B = 255
		r[1] = 24
		le.PutUint32(r[4:], 8)
		for i := range 8 {
			r = le.AppendUint32(r, uint32(i)<<16|uint32(2*i)<<8|0xff)
		}
	default:
		r[0], r[1] = 0, 1 // BadRequest
	}
	return r
}

func TestXClientAgainstFakeServer(t *testing.T) {
	path := fakeX(t)
	x, err := dialXSocket(context.Background(), ":9", path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.w != 4 || x.h != 2 || x.root != 0x100 || x.bpp != 32 || x.masks != [3]uint32{0xff0000, 0xff00, 0xff} {
		t.Fatalf("parsed setup: %+v", x)
	}
	if p, err := x.pointer(); err != nil || p != (guest.Point{X: 3, Y: 1}) {
		t.Fatalf("pointer = %v, %v", p, err)
	}
	if a, err := x.atom("_NET_SUPPORTING_WM_CHECK"); err != nil || a != 77 {
		t.Fatalf("atom = %d, %v", a, err)
	}
	if v, err := x.property(77); err != nil || len(v) != 4 {
		t.Fatalf("property = %v, %v", v, err)
	}
	img, err := x.screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := img.RGBAAt(1, 1), (color.RGBA{5, 10, 255, 255}); got != want {
		t.Fatalf("pixel (1,1) = %v, want %v", got, want)
	}
	c, err := x.cursor()
	if err != nil || c == nil {
		t.Fatalf("cursor = %+v, %v", c, err)
	}
	drawCursor(img, c)
	for _, tt := range []struct {
		x, y int
		want color.RGBA
	}{
		{1, 1, color.RGBA{255, 255, 255, 255}}, // opaque white
		{2, 1, color.RGBA{3, 6, 127, 255}},     // half black over (6, 12, 255)
		{0, 1, color.RGBA{4, 8, 255, 255}},     // untouched
	} {
		if got := img.RGBAAt(tt.x, tt.y); got != tt.want {
			t.Errorf("pixel (%d,%d) with the cursor = %v, want %v", tt.x, tt.y, got, tt.want)
		}
	}
	// A cursor hanging over the edge is clipped.
	drawCursor(img, &cursorImage{x: 3, y: 1, w: 2, h: 2, pix: []uint32{0xff000000, 0xff000000, 0xff000000, 0xff000000}})
	if got := img.RGBAAt(3, 1); got != (color.RGBA{0, 0, 0, 255}) {
		t.Errorf("pixel (3,1) under a black cursor = %v", got)
	}
	if _, _, err := x.call([]byte{99, 0, 1, 0}); err == nil {
		t.Fatal("an X error was not reported")
	}
}

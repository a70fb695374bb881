package desktop

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"math/bits"
	"net"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// A minimal X11 client, just enough to read the screen and the pointer
// without running a program per screenshot: connection setup without
// authorization (Xvfb runs without -auth, so local clients are let in),
// GetImage, QueryPointer, InternAtom, GetProperty and XFixes'
// GetCursorImage (GetImage leaves the pointer out; screenshots draw it in,
// as `scrot -p` does). Input goes through xdotool, which knows how to map
// any text to keys.

// xSocketPath is the unix socket of display ":n".
func xSocketPath(display string) string {
	return "/tmp/.X11-unix/X" + strings.TrimPrefix(display, ":")
}

// xconn is one connection to the X server; it is not safe for concurrent use.
type xconn struct {
	c     net.Conn
	r     *bufio.Reader
	root  uint32
	w, h  int
	bpp   int // bits per pixel of the root depth's ZPixmap format
	pad   int // scanline pad, in bits
	msb   bool
	masks [3]uint32 // red, green, blue masks of the root visual

	xfixes        byte // XFixes' major opcode once its version is agreed; 0: none
	xfixesChecked bool
}

// dialX connects to display and reads the first screen's description.
func dialX(ctx context.Context, display string) (*xconn, error) {
	return dialXSocket(ctx, display, xSocketPath(display))
}

func dialXSocket(ctx context.Context, display, path string) (*xconn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to X display %s: %w", display, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	x := &xconn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	if err := x.setup(); err != nil {
		c.Close()
		return nil, fmt.Errorf("X display %s: %w", display, err)
	}
	return x, nil
}

func (x *xconn) Close() error { return x.c.Close() }

// setup sends the connection request (little-endian, protocol 11.0, no
// authorization) and parses the server's answer.
func (x *xconn) setup() error {
	req := []byte{'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, err := x.c.Write(req); err != nil {
		return err
	}
	head := make([]byte, 8)
	if _, err := io.ReadFull(x.r, head); err != nil {
		return err
	}
	body := make([]byte, 4*int(le.Uint16(head[6:])))
	if _, err := io.ReadFull(x.r, body); err != nil {
		return err
	}
	if head[0] != 1 {
		n := min(int(head[1]), len(body))
		return fmt.Errorf("connection refused: %q", body[:n])
	}
	return x.parseSetup(body)
}

var le = binary.LittleEndian

var errShortSetup = errors.New("short connection setup reply")

// parseSetup reads the pixmap formats and the first screen from the body of
// the setup reply (the part after its first 8 bytes).
func (x *xconn) parseSetup(b []byte) error {
	if len(b) < 32 {
		return errShortSetup
	}
	vendorLen, nScreens, nFormats := int(le.Uint16(b[16:])), int(b[20]), int(b[21])
	x.msb = b[22] == 1
	off := 32 + pad4(vendorLen)
	formats := off
	off += 8 * nFormats
	if nScreens < 1 || len(b) < off+40 {
		return errShortSetup
	}
	scr := b[off:]
	x.root = le.Uint32(scr[0:])
	x.w, x.h = int(le.Uint16(scr[20:])), int(le.Uint16(scr[22:]))
	visual, depth := le.Uint32(scr[32:]), scr[38]
	for i := range nFormats {
		f := b[formats+8*i:]
		if f[0] == depth {
			x.bpp, x.pad = int(f[1]), int(f[2])
		}
	}
	if !x.findVisual(scr[40:], int(scr[39]), visual) {
		return fmt.Errorf("root visual %#x not described", visual)
	}
	return nil
}

// findVisual looks through a screen's allowed depths for the visual and
// keeps its colour masks.
func (x *xconn) findVisual(b []byte, nDepths int, visual uint32) bool {
	for range nDepths {
		if len(b) < 8 {
			return false
		}
		n := int(le.Uint16(b[2:]))
		b = b[8:]
		for range n {
			if len(b) < 24 {
				return false
			}
			if le.Uint32(b[0:]) == visual {
				x.masks = [3]uint32{le.Uint32(b[8:]), le.Uint32(b[12:]), le.Uint32(b[16:])}
				return true
			}
			b = b[24:]
		}
	}
	return false
}

func pad4(n int) int { return (n + 3) &^ 3 }

// call sends one request and reads its reply: the 32-byte header and the
// additional data.
func (x *xconn) call(req []byte) (head, data []byte, err error) {
	if _, err := x.c.Write(req); err != nil {
		return nil, nil, err
	}
	head = make([]byte, 32)
	for {
		if _, err := io.ReadFull(x.r, head); err != nil {
			return nil, nil, err
		}
		switch head[0] {
		case 0:
			return nil, nil, fmt.Errorf("X error %d on request %d", head[1], req[0])
		case 1:
			data = make([]byte, 4*int(le.Uint32(head[4:])))
			_, err = io.ReadFull(x.r, data)
			return head, data, err
		}
		// An event: none is selected, but skip any that comes.
	}
}

// pointer returns where the pointer is on the screen.
func (x *xconn) pointer() (guest.Point, error) {
	req := make([]byte, 8)
	req[0] = 38 // QueryPointer
	le.PutUint16(req[2:], 2)
	le.PutUint32(req[4:], x.root)
	head, _, err := x.call(req)
	if err != nil {
		return guest.Point{}, fmt.Errorf("query pointer: %w", err)
	}
	return guest.Point{X: int(int16(le.Uint16(head[16:]))), Y: int(int16(le.Uint16(head[18:])))}, nil
}

// atom returns the atom named name, or 0 if it does not exist.
func (x *xconn) atom(name string) (uint32, error) {
	req := make([]byte, 8+pad4(len(name)))
	req[0], req[1] = 16, 1 // InternAtom, only-if-exists
	le.PutUint16(req[2:], uint16(len(req)/4))
	le.PutUint16(req[4:], uint16(len(name)))
	copy(req[8:], name)
	head, _, err := x.call(req)
	if err != nil {
		return 0, fmt.Errorf("intern atom %s: %w", name, err)
	}
	return le.Uint32(head[8:]), nil
}

// property returns the value of a property of the root window (at most 1 KiB).
func (x *xconn) property(atom uint32) ([]byte, error) {
	req := make([]byte, 24)
	req[0] = 20 // GetProperty, delete=false
	le.PutUint16(req[2:], 6)
	le.PutUint32(req[4:], x.root)
	le.PutUint32(req[8:], atom)
	le.PutUint32(req[12:], 0) // AnyPropertyType
	le.PutUint32(req[16:], 0)
	le.PutUint32(req[20:], 256)
	head, data, err := x.call(req)
	if err != nil {
		return nil, fmt.Errorf("get property: %w", err)
	}
	n := int(le.Uint32(head[16:])) * int(head[1]) / 8
	return data[:min(n, len(data))], nil
}

// screenshot reads the whole screen as an opaque RGBA image.
func (x *xconn) screenshot() (*image.RGBA, error) {
	if x.bpp != 32 || x.msb {
		return nil, fmt.Errorf("screenshot: unsupported pixel format (%d bits per pixel, msb %v)", x.bpp, x.msb)
	}
	req := make([]byte, 20)
	req[0], req[1] = 73, 2 // GetImage, ZPixmap
	le.PutUint16(req[2:], 5)
	le.PutUint32(req[4:], x.root)
	le.PutUint16(req[12:], uint16(x.w))
	le.PutUint16(req[14:], uint16(x.h))
	le.PutUint32(req[16:], 0xffffffff)
	_, data, err := x.call(req)
	if err != nil {
		return nil, fmt.Errorf("get image: %w", err)
	}
	if len(data) < 4*x.w*x.h {
		return nil, fmt.Errorf("get image: %d bytes for a %dx%d screen", len(data), x.w, x.h)
	}
	return x.toRGBA(data), nil
}

// cursorImage is the pointer's image: premultiplied ARGB pixels, drawn
// with the hot spot at the pointer's position.
type cursorImage struct {
	x, y, w, h, xhot, yhot int
	pix                    []uint32
}

// maxCursor bounds the cursor size accepted from the server.
const maxCursor = 256

// cursor returns the pointer's image; nil, without error, on a server
// without XFixes.
func (x *xconn) cursor() (*cursorImage, error) {
	if !x.xfixesChecked {
		x.xfixesChecked = true
		const name = "XFIXES"
		req := make([]byte, 8+pad4(len(name)))
		req[0] = 98 // QueryExtension
		le.PutUint16(req[2:], uint16(len(req)/4))
		le.PutUint16(req[4:], uint16(len(name)))
		copy(req[8:], name)
		head, _, err := x.call(req)
		if err != nil {
			return nil, fmt.Errorf("query XFixes: %w", err)
		}
		if head[8] == 0 {
			return nil, nil
		}
		// The extension answers nothing but QueryVersion before a
		// version is agreed; GetCursorImage needs version 1.
		ver := make([]byte, 12)
		ver[0], ver[1] = head[9], 0 // XFixesQueryVersion
		le.PutUint16(ver[2:], 3)
		le.PutUint32(ver[4:], 4)
		if _, _, err := x.call(ver); err != nil {
			return nil, fmt.Errorf("XFixes version: %w", err)
		}
		x.xfixes = head[9]
	}
	if x.xfixes == 0 {
		return nil, nil
	}
	head, data, err := x.call([]byte{x.xfixes, 4, 1, 0}) // XFixesGetCursorImage
	if err != nil {
		return nil, fmt.Errorf("get cursor image: %w", err)
	}
	c := &cursorImage{
		x: int(int16(le.Uint16(head[8:]))), y: int(int16(le.Uint16(head[10:]))),
		w: int(le.Uint16(head[12:])), h: int(le.Uint16(head[14:])),
		xhot: int(le.Uint16(head[16:])), yhot: int(le.Uint16(head[18:])),
	}
	if c.w > maxCursor || c.h > maxCursor || len(data) < 4*c.w*c.h {
		return nil, fmt.Errorf("get cursor image: %dx%d with %d bytes", c.w, c.h, len(data))
	}
	c.pix = make([]uint32, c.w*c.h)
	for i := range c.pix {
		c.pix[i] = le.Uint32(data[4*i:])
	}
	return c, nil
}

// drawCursor blends the cursor into img (over, premultiplied alpha),
// clipped to the image.
func drawCursor(img *image.RGBA, c *cursorImage) {
	b := img.Bounds()
	for j := range c.h {
		for i := range c.w {
			p := c.pix[j*c.w+i]
			a := p >> 24
			px, py := c.x-c.xhot+i, c.y-c.yhot+j
			if a == 0 || !(image.Point{X: px, Y: py}).In(b) {
				continue
			}
			o := img.PixOffset(px, py)
			d := img.Pix[o : o+3 : o+3]
			for k, shift := range [3]int{16, 8, 0} {
				src := (p >> shift) & 0xff
				d[k] = byte(min(255, src+(uint32(d[k])*(255-a)+127)/255))
			}
		}
	}
}

// toRGBA converts 32-bit little-endian pixels with the visual's masks.
func (x *xconn) toRGBA(data []byte) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, x.w, x.h))
	var shift [3]int
	for i, m := range x.masks {
		// The top 8 bits of each mask become the channel.
		shift[i] = 32 - bits.LeadingZeros32(m) - 8
	}
	pix := img.Pix
	for i := 0; i < x.w*x.h; i++ {
		p := le.Uint32(data[4*i:])
		o := pix[4*i : 4*i+4 : 4*i+4]
		o[0] = byte(channel(p, x.masks[0], shift[0]))
		o[1] = byte(channel(p, x.masks[1], shift[1]))
		o[2] = byte(channel(p, x.masks[2], shift[2]))
		o[3] = 0xff
	}
	return img
}

func channel(p, mask uint32, shift int) uint32 {
	v := p & mask
	if shift >= 0 {
		return v >> shift
	}
	return v << -shift
}

// scaleDown resizes img to w×h by averaging the source pixels each target
// pixel covers (an area filter: no aliasing when shrinking text). It never
// enlarges: a target side longer than the image's keeps the image's.
func scaleDown(img *image.RGBA, w, h int) *image.RGBA {
	sw, sh := img.Rect.Dx(), img.Rect.Dy()
	w, h = min(w, sw), min(h, sh)
	if w == sw && h == sh {
		return img
	}
	xs, ys := areaWeights(sw, w), areaWeights(sh, h)
	// Horizontal pass into float rows, then vertical pass into the result.
	tmp := make([]float32, 3*w*sh)
	for y := range sh {
		row := img.Pix[y*img.Stride:]
		for x, ws := range xs {
			var r, g, b float32
			for _, t := range ws {
				p := row[4*t.i:]
				r += t.w * float32(p[0])
				g += t.w * float32(p[1])
				b += t.w * float32(p[2])
			}
			o := tmp[3*(y*w+x):]
			o[0], o[1], o[2] = r, g, b
		}
	}
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for y, ws := range ys {
		for x := range w {
			var r, g, b float32
			for _, t := range ws {
				p := tmp[3*(t.i*w+x):]
				r += t.w * p[0]
				g += t.w * p[1]
				b += t.w * p[2]
			}
			o := out.Pix[y*out.Stride+4*x:]
			o[0], o[1], o[2], o[3] = round8(r), round8(g), round8(b), 0xff
		}
	}
	return out
}

type tap struct {
	i int
	w float32
}

// areaWeights gives, for each of the m target pixels, the source pixels
// (of n ≥ m) it covers and the share of each.
func areaWeights(n, m int) [][]tap {
	out := make([][]tap, m)
	scale := float64(n) / float64(m)
	for j := range m {
		lo, hi := float64(j)*scale, float64(j+1)*scale
		for i := int(lo); i < n && float64(i) < hi; i++ {
			cover := min(hi, float64(i+1)) - max(lo, float64(i))
			if cover > 1e-9 {
				out[j] = append(out[j], tap{i: i, w: float32(cover / scale)})
			}
		}
	}
	return out
}

func round8(v float32) byte {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return byte(v + 0.5)
}

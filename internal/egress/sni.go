package egress

import (
	"errors"
	"io"
)

// maxHello bounds what the proxy buffers of a client's TLS ClientHello.
const maxHello = 16 << 10

var errNotHello = errors.New("not a TLS ClientHello")

// readHello reads a TLS ClientHello from r, whose first byte (0x16, a
// handshake record) the caller has seen, and returns the bytes it read
// (to replay upstream) and the server name it asks for ("" when none).
// It reads at most maxHello bytes of records; a malformed hello is an
// error, and the bytes read so far are returned with it.
func readHello(r io.Reader) (raw []byte, sni string, err error) {
	var msg []byte // the handshake message, across records
	for {
		hdr := make([]byte, 5)
		if n, err := io.ReadFull(r, hdr); err != nil {
			return append(raw, hdr[:n]...), "", err
		}
		raw = append(raw, hdr...)
		if hdr[0] != 0x16 || hdr[1] != 3 {
			return raw, "", errNotHello
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > maxHello || len(raw)+n > maxHello+5*4 {
			return raw, "", errNotHello
		}
		body := make([]byte, n)
		if m, err := io.ReadFull(r, body); err != nil {
			return append(raw, body[:m]...), "", err
		}
		raw = append(raw, body...)
		msg = append(msg, body...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != 1 {
			return raw, "", errNotHello
		}
		want := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if want > maxHello {
			return raw, "", errNotHello
		}
		if len(msg)-4 >= want {
			sni, err := helloServerName(msg[4 : 4+want])
			return raw, sni, err
		}
	}
}

// helloServerName reads the server_name extension of a ClientHello's body.
func helloServerName(b []byte) (string, error) {
	c := cursor{b: b}
	c.skip(2 + 32)              // version, random
	c.skip(int(c.u8()))         // session id
	c.skip(int(c.u16()))        // cipher suites
	c.skip(int(c.u8()))         // compression methods
	if c.bad || len(c.b) == 0 { // no extensions
		if c.bad {
			return "", errNotHello
		}
		return "", nil
	}
	ext := cursor{b: c.bytes(int(c.u16()))}
	if c.bad {
		return "", errNotHello
	}
	for len(ext.b) > 0 && !ext.bad {
		typ, data := ext.u16(), ext.bytes(int(ext.u16()))
		if ext.bad || typ != 0 {
			continue
		}
		list := cursor{b: data}
		names := cursor{b: list.bytes(int(list.u16()))}
		for len(names.b) > 0 && !names.bad {
			kind, name := names.u8(), names.bytes(int(names.u16()))
			if !names.bad && kind == 0 {
				return string(name), nil
			}
		}
		return "", errNotHello
	}
	if ext.bad {
		return "", errNotHello
	}
	return "", nil
}

// cursor reads big-endian fields, turning bad on a short read.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) bytes(n int) []byte {
	if c.bad || n > len(c.b) {
		c.bad = true
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) skip(n int) { c.bytes(n) }

func (c *cursor) u8() uint8 {
	v := c.bytes(1)
	if v == nil {
		return 0
	}
	return v[0]
}

func (c *cursor) u16() uint16 {
	v := c.bytes(2)
	if v == nil {
		return 0
	}
	return uint16(v[0])<<8 | uint16(v[1])
}

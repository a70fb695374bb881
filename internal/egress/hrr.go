package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// A TLS 1.3 server that answers a ClientHello with a HelloRetryRequest
// gets a second ClientHello, which some servers take their server name
// from (OpenSSL does): the name checked on the first would not be the one
// served. So when the server's first message is a HelloRetryRequest, the
// client's next ClientHello is checked as the first was.

// helloRetryRandom is the random of a ServerHello that is a
// HelloRetryRequest (RFC 8446 4.1.3).
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// copyDown copies up to the client like copyHalf; when hello is set by
// the time the server's first bytes come (the client's ClientHello went
// out, so they answer it), it first reads enough of them to say on retry
// whether they are a HelloRetryRequest. retry gets exactly one value.
func copyDown(client, up net.Conn, hello *atomic.Bool, retry chan<- bool, clean *atomic.Bool) error {
	said := false
	say := func(v bool) {
		if !said {
			said = true
			retry <- v
		}
	}
	defer say(false)
	// A record header, a handshake header, the version and the random.
	const need = 5 + 4 + 2 + 32
	var head []byte
	buf := make([]byte, need)
	for len(head) < need {
		n, err := up.Read(buf[:need-len(head)])
		head = append(head, buf[:n]...)
		if len(head) > 0 && (!hello.Load() || head[0] != 0x16) {
			break
		}
		if err != nil {
			break
		}
	}
	say(len(head) == need && head[5] == 2 && bytes.Equal(head[11:need], helloRetryRandom))
	if len(head) > 0 {
		if _, err := client.Write(head); err != nil {
			client.Close()
			up.Close()
			return err
		}
	}
	return copyHalf(client, up, clean)
}

// checkRetryHello reads what the client sends after a HelloRetryRequest:
// change_cipher_spec records, passed on, then its second ClientHello,
// refused (a *helloRefusal) for a server name other than host.
func (p *Proxy) checkRetryHello(s *stream, up *upstream, host string) error {
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	defer s.c.SetReadDeadline(time.Time{})
	for {
		first, err := s.br.Peek(1)
		if err != nil {
			return nil // the copy sees the same end
		}
		if first[0] != 0x14 {
			break
		}
		rec := make([]byte, 5)
		if _, err := io.ReadFull(s.br, rec); err != nil {
			return &helloRefusal{"TLS record unreadable after a HelloRetryRequest"}
		}
		n := int(rec[3])<<8 | int(rec[4])
		if n > 16 {
			return &helloRefusal{"TLS change_cipher_spec record of " + strconv.Itoa(n) + " bytes"}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(s.br, body); err != nil {
			return &helloRefusal{"TLS record unreadable after a HelloRetryRequest"}
		}
		if _, err := up.Write(append(rec, body...)); err != nil {
			return err
		}
	}
	raw, sni, err := readHello(s.br)
	if errors.Is(err, errNotHello) && len(raw) > 0 && raw[0] != 0x16 {
		_, err = up.Write(raw) // not a handshake record: the server refuses it
		return err
	}
	if err != nil {
		return &helloRefusal{"second TLS ClientHello unreadable or incomplete within " + helloTimeout.String()}
	}
	if sni != "" && normHost(sni) != host {
		name := normHost(sni)
		if !validHost(name) {
			name = strconv.Quote(capString(sni, 64))
		}
		return &helloRefusal{fmt.Sprintf("TLS server name %s (second ClientHello) differs from the host asked for %s", name, host)}
	}
	_, err = up.Write(raw)
	return err
}

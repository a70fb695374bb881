package egress

import (
	"net/netip"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// flipReply answers one DNS query: A for flip.test is 127.0.0.1 the first
// time and 127.0.0.2 after; anything else has no answer.
func flipReply(q []byte, asked *atomic.Int32) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
	b.EnableCompression()
	b.StartQuestions()
	b.Question(qs[0])
	b.StartAnswers()
	if qs[0].Type == dnsmessage.TypeA && qs[0].Name.String() == "flip.test." {
		a := netip.MustParseAddr("127.0.0.1")
		if asked.Add(1) > 1 {
			a = netip.MustParseAddr("127.0.0.2")
		}
		b.AResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a.As4()})
	}
	out, _ := b.Finish()
	return out
}

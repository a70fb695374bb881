package egress

// secrets_scrub.go keeps a secret's value out of what the sandbox reads:
// replaced by its placeholder in a streamed body and in header names.

import (
	"bytes"
	"io"
	"strings"
)

// brokerReplaceFold replaces every occurrence of old in s, in any ASCII
// case, by new.
func brokerReplaceFold(s, old, new string) string {
	ls, lo := brokerLowerASCII(s), brokerLowerASCII(old)
	var b strings.Builder
	for {
		i := strings.Index(ls, lo)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s, ls = s[i+len(old):], ls[i+len(old):]
	}
}

// brokerLowerASCII lower-cases ASCII letters only, keeping the length.
func brokerLowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// brokerReplacer writes to w what is written to it with every occurrence
// of old replaced by new, also when an occurrence is split across writes:
// it holds back the longest tail that could begin one (at most len(old)-1
// bytes) until the next write or Close.
type brokerReplacer struct {
	w        io.Writer
	old, new []byte
	pending  []byte
}

func (r *brokerReplacer) Write(p []byte) (int, error) {
	buf := p // the common case: nothing held back, p written without a copy
	if len(r.pending) > 0 {
		buf = append(r.pending, p...)
	}
	for {
		i := bytes.Index(buf, r.old)
		if i < 0 {
			break
		}
		if err := r.emit(buf[:i], r.new); err != nil {
			return 0, err
		}
		buf = buf[i+len(r.old):]
	}
	keep := brokerPartial(buf, r.old)
	if err := r.emit(buf[:len(buf)-keep]); err != nil {
		return 0, err
	}
	r.pending = bytes.Clone(buf[len(buf)-keep:])
	return len(p), nil
}

func (r *brokerReplacer) emit(parts ...[]byte) error {
	for _, b := range parts {
		if len(b) == 0 {
			continue
		}
		if _, err := r.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Close writes what was held back.
func (r *brokerReplacer) Close() error {
	if len(r.pending) == 0 {
		return nil
	}
	_, err := r.w.Write(r.pending)
	r.pending = nil
	return err
}

// brokerPartial is the length of the longest suffix of b that is a proper
// prefix of old.
func brokerPartial(b, old []byte) int {
	n := min(len(b), len(old)-1)
	for ; n > 0; n-- {
		if bytes.HasPrefix(old, b[len(b)-n:]) {
			return n
		}
	}
	return 0
}

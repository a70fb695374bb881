package lineedit

import (
	"context"
	"io"
	"strings"
	"testing"
)

// benchKeys measures one keystroke as a person types it: the key applied
// to a message that holds prefill, and the edit area redrawn (at human
// speed every key gets a redraw of its own). Keys alternate between a
// letter and a backspace, so the message keeps its size.
func benchKeys(b *testing.B, prefill string) {
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &countWriter{}
	e, err := New(pr, out, Config{Prompt: "you> ", Continue: "   … "})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.buf.set(prefill)
	b.ResetTimer()
	for i := range b.N {
		k := key{kind: keyRune, r: 'k'}
		if i%2 == 1 {
			k = key{kind: keyBackspace}
		}
		e.handle(k)
		e.redraw()
	}
	b.StopTimer()
	if got := strings.TrimSuffix(e.buf.String(), "k"); got != prefill {
		b.Fatalf("the message is %d bytes, want %d", len(got), len(prefill))
	}
	b.ReportMetric(float64(out.n)/float64(b.N), "B-drawn/key")
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func BenchmarkKeystroke(b *testing.B) {
	b.Run("one-line", func(b *testing.B) { benchKeys(b, "a question of sixty characters or so, as one types them") })
	b.Run("100-lines", func(b *testing.B) { benchKeys(b, strings.Repeat("some text on a line\n", 100)) })
}

// BenchmarkPaste pastes 1 MiB of 64-byte lines as one bracketed paste.
func BenchmarkPaste(b *testing.B) {
	text := strings.Repeat(strings.Repeat("x", 63)+"\n", 1<<14)
	for range b.N {
		pr, pw := io.Pipe()
		e, err := New(pr, io.Discard, Config{Prompt: "you> ", Continue: "   … "})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan string, 1)
		go func() { line, _ := e.ReadLine(context.Background()); done <- line }()
		_, _ = io.WriteString(pw, "\x1b[200~"+text+"\x1b[201~\r")
		if line := <-done; len(line) != len(text)-1 {
			b.Fatalf("pasted %d bytes, got %d", len(text)-1, len(line))
		}
		pw.Close()
		e.Close()
	}
	b.SetBytes(int64(len(text)))
}

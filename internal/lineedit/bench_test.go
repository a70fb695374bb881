package lineedit

import (
	"context"
	"io"
	"strings"
	"testing"
)

// benchKeys types b.N keys, one read each (so one redraw each), into a
// message that already holds prefill, and sends it.
func benchKeys(b *testing.B, prefill string) {
	pr, pw := io.Pipe()
	out := &countWriter{}
	e, err := New(pr, out, Config{Prompt: "you> ", Continue: "   … "})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	defer pw.Close()
	done := make(chan string, 1)
	go func() { line, _ := e.ReadLine(context.Background()); done <- line }()
	if _, err := io.WriteString(pw, prefill); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := io.WriteString(pw, "k"); err != nil {
			b.Fatal(err)
		}
	}
	_, _ = io.WriteString(pw, "\r")
	line := <-done
	b.StopTimer()
	if !strings.HasSuffix(line, strings.Repeat("k", b.N)) {
		b.Fatalf("typed %d keys, got a message of %d bytes", b.N, len(line))
	}
	b.ReportMetric(float64(out.n)/float64(b.N), "B-drawn/key")
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func BenchmarkKeystroke(b *testing.B) {
	b.Run("one-line", func(b *testing.B) { benchKeys(b, "") })
	b.Run("100-lines", func(b *testing.B) { benchKeys(b, strings.Repeat("some text on a line\x1b\r", 100)) })
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

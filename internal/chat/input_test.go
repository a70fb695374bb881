package chat

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestLines(t *testing.T) {
	typed := "hello\n" +
		pasteStart + "line one\nline two\n\nline four" + pasteEnd + "\n" +
		"first \\\nsecond\n" +
		"/quit\n" +
		"last without newline"
	in := NewLines(strings.NewReader(typed), io.Discard)
	want := []string{"hello", "line one\nline two\n\nline four", "first \nsecond", "/quit", "last without newline"}
	for i, w := range want {
		got, err := in.Next(context.Background())
		if err != nil || got != w {
			t.Fatalf("message %d = %q, %v; want %q", i, got, err, w)
		}
	}
	if _, err := in.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("after the last message: %v, want EOF", err)
	}
}

// TestLinesCanceled: Ctrl-C (SIGINT) at a cooked terminal's prompt, or a
// SIGTERM, ends Next without waiting for Enter; a message typed after is
// not lost.
func TestLinesCanceled(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	in := NewLines(pr, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := in.Next(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next waited for input after its context ended")
	}
	go func() { _, _ = io.WriteString(pw, "later\n") }()
	if got, err := in.Next(context.Background()); got != "later" || err != nil {
		t.Errorf("next message %q, %v", got, err)
	}
}

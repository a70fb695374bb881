package chat

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
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

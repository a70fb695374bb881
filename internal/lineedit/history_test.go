package lineedit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHistoryRecall(t *testing.T) {
	h := newHarness(t, Config{})
	h.readLine("one\r")
	h.readLine("two\x1b\rlines\r")
	h.readLine("two\x1b\rlines\r") // a repeat is not added
	h.readLine("\r")               // nor an empty message
	if got := h.readLine(up + "\r"); got != "two\nlines" {
		t.Errorf("up: %q", got)
	}
	// Up on a recalled multi-line entry moves through its lines first.
	if got := h.readLine(up + up + "X\r"); got != "twoX\nlines" {
		t.Errorf("up up: %q", got)
	}
	if got := h.readLine(strings.Repeat(up, 5) + "\r"); got != "one" {
		t.Errorf("up to the oldest: %q", got)
	}
	if got := h.readLine("draft" + up + up + down + down + "!\r"); got != "draft!" {
		t.Errorf("down back to the draft: %q", got)
	}
	if got := h.readLine("x\x1b\ry" + up + "\x01" + up + "\r"); got != "draft!" {
		t.Errorf("up from line 1 of a multi-line buffer: %q", got)
	}
}

func TestHistoryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chats", "s1", "prompt_history")
	h := newHarness(t, Config{HistoryFile: path})
	h.readLine("first\r")
	h.readLine("multi\x1b\rline \"quoted\"\r")
	h.readLine(strings.Repeat("z", historyEntryMax+1) + "\r")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if got, want := string(data), "\"first\"\n\"multi\\nline \\\"quoted\\\"\"\n"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}

	h2 := newHarness(t, Config{HistoryFile: path})
	if got := h2.readLine(up + up + up + "\r"); got != "first" {
		t.Errorf("a new editor recalls %q, want first", got)
	}
}

func TestHistoryCorruptLineSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hist")
	if err := os.WriteFile(path, []byte("\"a\"\n{not json\n42\n\"b\"\n\"c"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{HistoryFile: path})
	if got := h.readLine(up + up + up + "\r"); got != "a" {
		t.Errorf("oldest %q, want a", got)
	}
}

func TestHistoryCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hist")
	h := newHarness(t, Config{HistoryFile: path, HistoryMax: 3})
	for _, s := range []string{"1", "2", "3", "4", "5"} {
		h.readLine(s + "\r")
	}
	data, _ := os.ReadFile(path)
	if got := strings.Count(string(data), "\n"); got > 3 {
		t.Errorf("file keeps %d entries, want at most 3", got)
	}
	h2 := newHarness(t, Config{HistoryFile: path, HistoryMax: 3})
	if got := h2.readLine(strings.Repeat(up, 6) + "\r"); got != "3" {
		t.Errorf("oldest kept %q, want 3", got)
	}

	// A file written longer than the cap is trimmed when read.
	long := "\"a\"\n\"b\"\n\"c\"\n\"d\"\n\"e\"\n"
	if err := os.WriteFile(path, []byte(long), 0o600); err != nil {
		t.Fatal(err)
	}
	h3 := newHarness(t, Config{HistoryFile: path, HistoryMax: 2})
	if data, _ := os.ReadFile(path); string(data) != "\"d\"\n\"e\"\n" {
		t.Errorf("trimmed file %q", data)
	}
	if got := h3.readLine(strings.Repeat(up, 6) + "\r"); got != "d" {
		t.Errorf("oldest kept %q, want d", got)
	}
}

func TestSetHistoryFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	h := newHarness(t, Config{HistoryFile: a})
	h.readLine("in a\r")
	if err := h.e.SetHistoryFile(b); err != nil {
		t.Fatal(err)
	}
	if got := h.readLine(up + "\r"); got != "" {
		t.Errorf("up in b's empty history: %q", got)
	}
	h.readLine("in b\r")
	if err := h.e.SetHistoryFile(a); err != nil {
		t.Fatal(err)
	}
	if got := h.readLine(up + "\r"); got != "in a" {
		t.Errorf("up back in a: %q", got)
	}
	if data, _ := os.ReadFile(b); string(data) != "\"in b\"\n" {
		t.Errorf("b holds %q", data)
	}
}

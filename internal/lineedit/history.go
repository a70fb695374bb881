package lineedit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	defaultHistoryMax = 1000
	historyEntryMax   = 64 << 10
)

// history is the list of sent messages, oldest first, and the file that
// keeps them: one JSON string per line.
type history struct {
	path      string
	max       int
	entries   []string
	fileLines int // entries in the file, to know when to trim it
}

// loadHistory reads the history file, skipping lines that are not a JSON
// string, and trims the file when it holds more than max entries.
func loadHistory(path string, max int) (*history, error) {
	if max <= 0 {
		max = defaultHistoryMax
	}
	h := &history{path: path, max: max}
	if path == "" {
		return h, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		var s string
		if len(bytes.TrimSpace(line)) > 0 && json.Unmarshal(line, &s) == nil {
			h.entries = append(h.entries, s)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
	}
	h.fileLines = len(h.entries)
	if len(h.entries) > max {
		h.entries = h.entries[len(h.entries)-max:]
		_ = h.rewrite() // a file too long is no reason not to edit
	}
	return h, nil
}

// add appends s unless it is empty or the same as the last entry, and
// saves it unless it is too long to keep.
func (h *history) add(s string) error {
	if s == "" || (len(h.entries) > 0 && h.entries[len(h.entries)-1] == s) {
		return nil
	}
	h.entries = append(h.entries, s)
	if len(h.entries) > h.max {
		h.entries = h.entries[len(h.entries)-h.max:]
	}
	if h.path == "" || len(s) > historyEntryMax {
		return nil
	}
	if h.fileLines >= h.max {
		return h.rewrite()
	}
	return h.appendLine(s)
}

func (h *history) appendLine(s string) error {
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	h.fileLines++
	return nil
}

// rewrite replaces the file by the entries kept, through a temporary file
// so a crash leaves the old or the new history.
func (h *history) rewrite() error {
	var buf bytes.Buffer
	n := 0
	for _, s := range h.entries {
		if len(s) > historyEntryMax {
			continue
		}
		line, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encode history: %w", err)
		}
		buf.Write(append(line, '\n'))
		n++
	}
	tmp := h.path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	h.fileLines = n
	return nil
}

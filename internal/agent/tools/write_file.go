package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameWriteFile is the write_file tool's name.
const NameWriteFile = "write_file"

// WriteFileTool creates or replaces a file.
type WriteFileTool struct{}

var writeFileSchema = object([]string{"path", "content"},
	str("path", "The file to write: relative to /workspace (e.g. \"src/app.py\") or absolute inside /workspace. Missing parent directories are created."),
	str("content", "The complete new content of the file, exactly as it should be saved."),
)

const writeFileDescription = `Create a file, or replace an existing file's whole content, in the workspace. Parent directories are created as needed, and an existing file keeps its permissions (e.g. stays executable).

- Use it for new files and for rewrites; to change part of an existing file, edit_file is safer and cheaper.
- The content is written exactly as given: no line numbers, no escaping beyond JSON's.
- The write is atomic: other processes see the old file or the new one, never half of it.
- Only paths inside /workspace can be written.`

// Spec describes the write_file tool to the model.
func (WriteFileTool) Spec() llm.Tool { return writeFileSpec }

var writeFileSpec = spec(NameWriteFile, writeFileDescription, writeFileSchema)

type writeFileInput struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Run writes the file and says whether it created or overwrote it.
func (WriteFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in writeFileInput
	if r, ok := decodeInput(NameWriteFile, writeFileSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(in.Path) == "" {
		return errorf("write_file: path is empty"), nil
	}
	old, exists, err := existing(ctx, g, in.Path)
	if err != nil {
		return failure(NameWriteFile, err)
	}
	if exists && old.Type == "dir" {
		return errorf("write_file: %s is a directory; give the path of a file inside it", old.Path), nil
	}
	var mode uint32 // a new file gets the guest's default
	if old.Type == "file" {
		mode = old.Mode
	}
	fi, err := g.WriteFile(ctx, in.Path, []byte(in.Content), mode)
	if err != nil {
		return failure(NameWriteFile, err)
	}
	return Result{Text: writeSummary(fi, old, exists, in.Content)}, nil
}

// existing stats path, reporting a missing file as exists=false.
func existing(ctx context.Context, g *guest.Client, path string) (fi guest.FileInfo, exists bool, err error) {
	fi, err = g.Stat(ctx, path)
	if errors.Is(err, guest.ErrNotFound) {
		return guest.FileInfo{}, false, nil
	}
	return fi, err == nil, err
}

func writeSummary(fi, old guest.FileInfo, existed bool, content string) string {
	lines := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		lines++
	}
	if !existed {
		return fmt.Sprintf("created %s (%s, %s)", fi.Path, plural(len(content), "byte"), plural(lines, "line"))
	}
	return fmt.Sprintf("overwrote %s (%s, %s; it was %s)", fi.Path, plural(len(content), "byte"), plural(lines, "line"), plural(int(old.Size), "byte"))
}

// plural writes n and unit, in the plural unless n is 1 ("entry" becomes "entries").
func plural(n int, unit string) string {
	switch {
	case n == 1:
		return "1 " + unit
	case strings.HasSuffix(unit, "y"):
		return fmt.Sprintf("%d %sies", n, unit[:len(unit)-1])
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

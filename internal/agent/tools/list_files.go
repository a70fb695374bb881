package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameListFiles is the list_files tool's name.
const NameListFiles = "list_files"

// Limits of list_files.
const (
	ListDefaultEntries = 500
	ListMaxEntries     = 5000
)

// ListFilesTool lists a directory of the workspace.
type ListFilesTool struct{}

// skippedDirs are directories whose contents a recursive listing leaves
// out: version control and generated dependencies, which would drown the
// rest. Listing one of them by path shows it.
var skippedDirs = map[string]bool{
	".git": true, "node_modules": true, "__pycache__": true,
	".venv": true, ".mypy_cache": true, ".pytest_cache": true,
}

var listFilesSchema = object(nil,
	str("path", "The directory to list: relative to /workspace or absolute inside /workspace (default: /workspace itself)."),
	boolean("recursive", "List subdirectories too, depth first (default false: only the directory's own entries)."),
	integer("max_entries", fmt.Sprintf("The most entries to show (default %d, at most %d).", ListDefaultEntries, ListMaxEntries), 1, ListMaxEntries),
)

var listFilesDescription = fmt.Sprintf(`List the files and directories in a workspace directory: one entry per line with its path relative to /workspace; directories end in "/", files show their size, symlinks their target.

- recursive=true walks subdirectories too. The contents of %s are not walked (the directory itself is shown); list such a directory by its path to see inside.
- At most max_entries entries (default %d, max %d) are shown; a note says when the listing was cut. For big trees, list a subdirectory, or use search_files to find files by content.`, skippedNames(), ListDefaultEntries, ListMaxEntries)

// Spec describes the list_files tool to the model.
func (ListFilesTool) Spec() llm.Tool { return listFilesSpec }

var listFilesSpec = spec(NameListFiles, listFilesDescription, listFilesSchema)

type listFilesInput struct {
	Path       string `json:"path"`
	Recursive  bool   `json:"recursive"`
	MaxEntries int    `json:"max_entries"`
}

// Run lists the directory.
func (ListFilesTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in listFilesInput
	if r, ok := decodeInput(NameListFiles, listFilesSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if in.MaxEntries == 0 {
		in.MaxEntries = ListDefaultEntries
	}
	root, err := g.Stat(ctx, in.Path)
	if err != nil {
		return failure(NameListFiles, err)
	}
	if root.Type == "file" {
		return errorf("list_files: %s is a file, not a directory; use read_file to read it", root.Path), nil
	}
	l := &lister{g: g, max: in.MaxEntries, recursive: in.Recursive}
	if err := l.walk(ctx, in.Path, 0); err != nil {
		return failure(NameListFiles, err)
	}
	return Result{Text: l.text(root.Path, in)}, nil
}

// lister walks directories one guest call each, so that it can leave out
// the contents of skippedDirs without reading them.
type lister struct {
	g         *guest.Client
	max       int
	recursive bool
	lines     []string
	truncated bool
	skipped   []string // unreadable directories
}

func (l *lister) walk(ctx context.Context, dir string, depth int) error {
	listing, err := l.g.List(ctx, dir, false, l.max-len(l.lines)+1)
	if err != nil {
		var ge *guest.Error
		if depth > 0 && errors.As(err, &ge) { // a subdirectory the agent may not read
			l.skipped = append(l.skipped, dir)
			return nil
		}
		return err
	}
	for _, e := range listing.Entries {
		if len(l.lines) >= l.max {
			l.truncated = true
			return nil
		}
		l.lines = append(l.lines, l.entry(e))
		if e.Type == "dir" && l.recursive && !skippedDirs[path.Base(e.Path)] {
			if err := l.walk(ctx, e.Path, depth+1); err != nil {
				return err
			}
		}
	}
	l.truncated = l.truncated || listing.Truncated
	return nil
}

func (l *lister) entry(e guest.FileInfo) string {
	switch e.Type {
	case "dir":
		if l.recursive && skippedDirs[path.Base(e.Path)] {
			return e.Path + "/  (contents not listed)"
		}
		return e.Path + "/"
	case "file":
		return fmt.Sprintf("%s  %s", e.Path, humanSize(e.Size))
	case "symlink":
		return fmt.Sprintf("%s -> %s", e.Path, e.Target)
	}
	return e.Path + "  (special file)"
}

func (l *lister) text(root string, in listFilesInput) string {
	var b strings.Builder
	how := ""
	if in.Recursive {
		how = ", recursive"
	}
	fmt.Fprintf(&b, "%s (%s%s):\n", workspacePath(root), plural(len(l.lines), "entry"), how)
	if len(l.lines) == 0 {
		b.WriteString("(empty directory)\n")
	}
	for _, line := range l.lines {
		b.WriteString(line + "\n")
	}
	if l.truncated {
		fmt.Fprintf(&b, "[listing cut at %d entries: list a subdirectory, or raise max_entries (at most %d)]\n", len(l.lines), ListMaxEntries)
	}
	if len(l.skipped) > 0 {
		fmt.Fprintf(&b, "[not readable: %s]\n", strings.Join(l.skipped, ", "))
	}
	return b.String()
}

func workspacePath(rel string) string {
	if rel == "." || rel == "" {
		return "/workspace"
	}
	return "/workspace/" + rel
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGT"[exp])
}

func skippedNames() string {
	names := sortedKeys(skippedDirs)
	return strings.Join(names, ", ")
}

package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameSearchFiles is the search_files tool's name.
const NameSearchFiles = "search_files"

// Limits of search_files.
const (
	SearchDefaultResults = 100
	SearchMaxResults     = 1000
)

// SearchFilesTool finds lines matching a regular expression.
type SearchFilesTool struct{}

var searchFilesSchema = object([]string{"pattern"},
	str("pattern", "A regular expression in Go's RE2 syntax, matched against each line, e.g. \"def \\\\w+\\\\(\" or \"TODO|FIXME\". No lookahead, lookbehind or backreferences. Escape regex characters (. ( ) [ ] { } * + ? | ^ $ \\\\) to match them literally."),
	str("path", "The directory (or file) to search: relative to /workspace or absolute inside it (default: all of /workspace)."),
	str("glob", "Only search files whose base name matches this shell pattern, e.g. \"*.py\" or \"test_*\". It is matched against the file name only, not the directory path; \"**\" and braces are not supported."),
	boolean("ignore_case", "Match letters case-insensitively (default false)."),
	integer("max_results", fmt.Sprintf("The most matching lines to return (default %d, at most %d).", SearchDefaultResults, SearchMaxResults), 1, SearchMaxResults),
)

const searchFilesDescription = `Search the contents of workspace files for a regular expression, like grep -rn. Each matching line comes back as "path:line: text", with the path relative to /workspace.

- The pattern is RE2 syntax (Go's regexp): no lookaround or backreferences. Use ignore_case for case-insensitive search, glob (e.g. "*.py") to restrict to file names.
- .git directories, binary files and files over 8 MiB are skipped; lines longer than 400 bytes are cut.
- At most max_results lines (default 100, max 1000) come back; a note says when there were more. Narrow the pattern, path or glob to see the rest.
- Finding no match is not an error.`

// Spec describes the search_files tool to the model.
func (SearchFilesTool) Spec() llm.Tool { return searchFilesSpec }

var searchFilesSpec = spec(NameSearchFiles, searchFilesDescription, searchFilesSchema)

type searchFilesInput struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	MaxResults int    `json:"max_results"`
}

// Run searches through the guest.
func (SearchFilesTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in searchFilesInput
	if r, ok := decodeInput(NameSearchFiles, searchFilesSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if in.Pattern == "" {
		return errorf("search_files: pattern is empty"), nil
	}
	if in.MaxResults == 0 {
		in.MaxResults = SearchDefaultResults
	}
	res, err := g.Search(ctx, guest.SearchRequest{Pattern: in.Pattern, Path: in.Path, Glob: in.Glob,
		IgnoreCase: in.IgnoreCase, MaxResults: in.MaxResults})
	if err != nil {
		return failure(NameSearchFiles, err)
	}
	return Result{Text: Truncate(searchText(res, in), env.maxOutput())}, nil
}

func searchText(res guest.SearchResult, in searchFilesInput) string {
	var b strings.Builder
	where := "/workspace"
	if in.Path != "" {
		where = in.Path
	}
	if in.Glob != "" {
		where += " (files matching " + in.Glob + ")"
	}
	switch len(res.Matches) {
	case 0:
		fmt.Fprintf(&b, "no matches for /%s/ in %s\n", in.Pattern, where)
	case 1:
		fmt.Fprintf(&b, "1 match for /%s/ in %s:\n", in.Pattern, where)
	default:
		fmt.Fprintf(&b, "%d matches for /%s/ in %s:\n", len(res.Matches), in.Pattern, where)
	}
	for _, m := range res.Matches {
		fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, strings.ToValidUTF8(strings.TrimRight(m.Text, "\r"), "\uFFFD"))
	}
	if res.Truncated {
		fmt.Fprintf(&b, "[results cut at max_results=%d: there are more matches. Narrow the pattern, path or glob, or raise max_results (at most %d)]\n", in.MaxResults, SearchMaxResults)
	}
	if res.Skipped > 0 {
		fmt.Fprintf(&b, "[%d binary or very large files were not searched]\n", res.Skipped)
	}
	return b.String()
}

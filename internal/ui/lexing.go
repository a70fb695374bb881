package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"syscall"
	"time"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// The file viewer's lexing, in a child process of its own ("agentbox
// highlight", ServeHighlight): chroma's lexers are regular expressions
// (regexp2, which backtracks) over what a sandbox wrote, and some take
// time quadratic or worse in a file's length. chroma gives each of its
// regexps a 250 ms timeout of its own, which no caller can change, so a
// single token can take seconds; a lexer that delegates to another
// (PHP in HTML, a Markdown code block of another language) tokenises
// all of it before it returns its first token; and the analysers that
// guess a language from the text have no timeout at all. Between
// tokens is therefore not enough: the parent kills the child when its
// budget passes or its request goes away, which stops all of it.

// highlightRequest is what the child reads on its standard input.
type highlightRequest struct {
	Name   string        `json:"name"` // the file's base name, which picks the lexer
	Text   string        `json:"text"`
	Budget time.Duration `json:"budget"`
}

// highlightResult is what the child writes on its standard output.
type highlightResult struct {
	Language string `json:"language"`
	// Lines are the text's lines, each its tokens: a class and a text.
	Lines [][][2]string `json:"lines"`
}

// analyseBytes is how much of a file whose name picks no lexer the
// analysers read: they look for a first line (#!, <?xml) or an early
// keyword, and some of their patterns are quadratic in what they read.
const analyseBytes = 1024

// ServeHighlight is the child process of the file viewer: it reads a
// request from r, tokenises its text with the lexer its name (or else
// its first bytes) suggests, and writes the lines to w. It limits its
// own CPU time to the budget and gives up between tokens when the
// budget has passed; the parent kills it if a token takes longer.
func ServeHighlight(r io.Reader, w io.Writer) error {
	var req highlightRequest
	if err := json.NewDecoder(io.LimitReader(r, 8*MaxHighlightBytes)).Decode(&req); err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	if err := limitCPU(req.Budget); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), req.Budget)
	defer cancel()
	res, err := tokenise(ctx, req.Name, req.Text)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the template escapes
	return enc.Encode(res)
}

// limitCPU has the kernel end the process once it has used its budget
// of CPU time and a second more, should its parent be gone.
func limitCPU(budget time.Duration) error {
	s := uint64(budget/time.Second) + 1
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: s, Max: s + 1}); err != nil {
		return fmt.Errorf("limit cpu: %w", err)
	}
	return nil
}

// tokenise lexes text into lines of classed tokens, stopping when ctx
// ends. Tokens are taken one by one, never through chroma.Coalesce,
// whose one call takes tokens until the type changes: thousands of one
// character error tokens, each after a timed-out match, would be one.
func tokenise(ctx context.Context, name, text string) (highlightResult, error) {
	lexer := pickLexer(name, text)
	it, err := lexer.Tokenise(nil, text)
	if err != nil {
		return highlightResult{}, fmt.Errorf("tokenise: %w", err)
	}
	var toks []chroma.Token
	for t := it(); t != chroma.EOF; t = it() {
		if err := ctx.Err(); err != nil {
			return highlightResult{}, fmt.Errorf("tokenise: %w", err)
		}
		toks = append(toks, t)
	}
	res := highlightResult{Language: lexer.Config().Name}
	for _, line := range chroma.SplitTokensIntoLines(toks) {
		res.Lines = append(res.Lines, classed(line))
	}
	return res, nil
}

// classed is a line's tokens as classes and texts, neighbours of one
// class merged.
func classed(line []chroma.Token) [][2]string {
	var out [][2]string
	for _, t := range line {
		c := tokenClass(t.Type)
		if n := len(out); n > 0 && out[n-1][0] == c {
			out[n-1][1] += t.Value
			continue
		}
		out = append(out, [2]string{c, t.Value})
	}
	return out
}

// pickLexer is the lexer name's pattern picks, or else the one the
// analysers find likeliest from the first analyseBytes of text, or else
// plain text.
func pickLexer(name, text string) chroma.Lexer {
	if l := lexers.Match(path.Base(name)); l != nil {
		return l
	}
	if l := lexers.Analyse(text[:min(len(text), analyseBytes)]); l != nil {
		return l
	}
	return lexers.Fallback
}

// tokenClass is chroma's CSS class of a token type (app.css has their
// colours), or its nearest parent's.
func tokenClass(t chroma.TokenType) string {
	for ; t != 0; t = t.Parent() {
		if c, ok := chroma.StandardTypes[t]; ok {
			return c
		}
	}
	return ""
}

package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/chroma/v2/lexers"

	"github.com/agentbox/agentbox/internal/workspace"
)

// TestMain makes the test binary the highlighter too: "ui.test
// highlight" is the child a highlighter of the tests starts.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "highlight" {
		if err := ServeHighlight(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testHighlight is a Highlight whose child is this test binary.
func testHighlight(t *testing.T, budget time.Duration, concurrency int) Highlight {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Highlight{Command: exe, Budget: budget, Concurrency: concurrency}
}

func testHighlighter(t *testing.T, budget time.Duration, concurrency int) *highlighter {
	return newHighlighter(testHighlight(t, budget, concurrency), slog.New(slog.DiscardHandler))
}

// slowJava takes the Java lexer seconds a line (its method pattern
// backtracks over a line of words), within the limits: 128 lines of
// 999 bytes.
var slowJava = strings.Repeat(strings.Repeat("a ", 499)+"\n", 128)

// hostileLines are the patterns that make lexers backtrack (long runs
// of one punctuation character, words, unclosed strings and comments,
// deep nesting), each as lines within MaxHighlightLine.
var hostileLines = []string{
	strings.Repeat(";", 999), strings.Repeat("/", 999), strings.Repeat("a ", 499),
	`"` + strings.Repeat("a", 998), "'" + strings.Repeat("\\'", 499), "/*" + strings.Repeat("*", 997),
	"<!--" + strings.Repeat("-", 995), strings.Repeat("(", 999), strings.Repeat("{[", 499),
	strings.Repeat("<a ", 333), strings.Repeat("#", 999), strings.Repeat("$", 999), strings.Repeat("\\", 999),
	strings.Repeat("0.", 499), strings.Repeat("`", 999), strings.Repeat("=", 999),
}

// hostileFile is every hostile line, each repeated to 4 KiB or so: one
// file a lexer goes through until one of them takes its budget.
func hostileFile() string {
	var b strings.Builder
	for _, l := range hostileLines {
		b.WriteString(strings.Repeat(l+"\n", 4))
	}
	return b.String()
}

// lexerFiles names a file for each lexer chroma picks by a name's
// pattern: the lexer's first pattern with its wildcards filled in.
func lexerFiles() map[string]string {
	files := map[string]string{}
	for _, l := range lexers.GlobalLexerRegistry.Lexers {
		for _, glob := range l.Config().Filenames {
			name := strings.NewReplacer("*", "x", "?", "x").Replace(glob)
			if i := strings.IndexByte(name, '['); i >= 0 {
				name = name[:i] + name[i+1:i+2] + name[strings.IndexByte(name, ']')+1:]
			}
			if picked := lexers.Match(name); picked != nil {
				files[picked.Config().Name] = name
				break
			}
		}
	}
	return files
}

// text is what a file's viewer shows, concatenated.
func (h highlighted) text() string {
	var b strings.Builder
	for _, l := range h.Lines {
		for _, t := range l.Tokens {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestHighlightHostileFiles: a hostile file for every lexer chroma picks
// by a name answers within 2 s, whole: highlighted, or as plain text
// when it took the (tight) budget. The files, one line each,
// and a file over the size limit are plain text at once.
func TestHighlightHostileFiles(t *testing.T) {
	const budget = 250 * time.Millisecond
	h := testHighlighter(t, budget, 2)
	text := hostileFile()
	files := lexerFiles()
	var mu sync.Mutex
	var overBudget, failed []string
	names := make(chan string)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for lexer := range names {
				start := time.Now()
				got := h.highlight(t.Context(), files[lexer], text)
				took := time.Since(start)
				if took > 2*time.Second || got.text() != text {
					t.Errorf("%s (%s): %v, %q, the text kept: %v", lexer, files[lexer], took, got.Plain, got.text() == text)
				}
				switch {
				case strings.Contains(got.Plain, "took more than"):
					mu.Lock()
					overBudget = append(overBudget, lexer)
					mu.Unlock()
					continue
				case got.Plain == "the highlighter failed":
					// chroma's own bugs (its YANG lexer panics with
					// "unknown state comment" on these lines) end the
					// child, never the server: plain text.
					mu.Lock()
					failed = append(failed, lexer)
					mu.Unlock()
					continue
				}
				if got.Plain != "" || got.Language != lexer {
					t.Errorf("%s (%s): language %q, plain: %q", lexer, files[lexer], got.Language, got.Plain)
				}
			}
		})
	}
	for lexer := range files {
		names <- lexer
	}
	close(names)
	wg.Wait()
	if len(files) < 200 {
		t.Errorf("%d lexers picked by name; chroma has more", len(files))
	}
	t.Logf("%d lexers; over %v: %d %v; the highlighter failed: %v", len(files), budget, len(overBudget), overBudget, failed)
	if len(failed) > 3 {
		t.Errorf("the highlighter failed for %d lexers: %v", len(failed), failed)
	}

	for name, text := range map[string]string{
		"a.dts": strings.Repeat(";", 8000), "a.json": strings.Repeat("/", 16000), "Main.java": strings.Repeat("a ", 8000),
		"big.go": strings.Repeat("x := 1\n", MaxHighlightBytes/7+1),
	} {
		start := time.Now()
		got := h.highlight(t.Context(), name, text)
		if took := time.Since(start); took > 100*time.Millisecond || got.Plain == "" || got.text() != text {
			t.Errorf("%s: %v, plain %q", name, took, got.Plain)
		}
	}
}

// TestHighlightBudget: a file that takes the Java lexer seconds is plain
// text once its budget has passed, and its child is gone.
func TestHighlightBudget(t *testing.T) {
	h := testHighlighter(t, 500*time.Millisecond, 1)
	var pid int
	h.started = func(p int) { pid = p }
	start := time.Now()
	got := h.highlight(t.Context(), "Main.java", slowJava)
	if took := time.Since(start); took > 2*time.Second || !strings.Contains(got.Plain, "took more than 500ms") || got.text() != slowJava {
		t.Fatalf("%v, plain %q", took, got.Plain)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the highlighter %d is still there: %v", pid, err)
	}
}

// TestHighlightStopsWhenClientGoes: a view whose client goes away ends
// its highlighter then, not when its budget (a minute) passes.
func TestHighlightStopsWhenClientGoes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Main.java"), []byte(slowJava), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newLog()
	s.ws = workspace.NewInPlace(dir)
	u := New(Config{Highlight: testHighlight(t, time.Minute, 1)}, s, nil)
	pids := make(chan int, 1)
	u.hl.started = func(pid int) { pids <- pid }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("id", "j1")
		_ = u.View(w, r) // the client is gone: writing the view fails

	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/?path=Main.java", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	pid := <-pids
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request: %v", err)
	}
	gone := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(gone) {
			t.Fatalf("the highlighter %d still runs 5 s after its client went", pid)
		}
		time.Sleep(10 * time.Millisecond) // polls for a process of another's ending
	}
	// The slot is free again: the next file is highlighted.
	got := u.hl.highlight(t.Context(), "main.go", "package main\n")
	if got.Plain != "" || got.Language != "Go" {
		t.Errorf("after the client went: %+v", got)
	}
}

// TestHighlightConcurrencyBounded: eight slow files at once run in two
// children at most; each answers within its budget, plain text.
func TestHighlightConcurrencyBounded(t *testing.T) {
	const budget = time.Second
	h := testHighlighter(t, budget, 2)
	var mu sync.Mutex
	var pids []int
	most := 0
	h.started = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		pids = append(pids, pid)
		alive := 0
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil {
				alive++
			}
		}
		most = max(most, alive)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			start := time.Now()
			got := h.highlight(t.Context(), "Main.java", slowJava)
			if took := time.Since(start); took > budget+time.Second || got.Plain == "" || got.text() != slowJava {
				t.Errorf("%v, plain %q", took, got.Plain)
			}
		})
	}
	wg.Wait()
	if most > 2 || len(pids) < 2 {
		t.Errorf("%d highlighters at once, %d in all; want at most 2", most, len(pids))
	}
}

package memory

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTerms(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Hello, World", []string{"hello", "world"}},
		{"parseHTTPRequest", []string{"parsehttprequest", "parse", "http", "request"}},
		{"snake_case.name", []string{"snake", "case", "name"}},
		{"sha256 v1.2.30", []string{"sha256", "sha", "256", "v1", "1", "2", "30"}},
		{"ÉCOLE naïve", []string{"école", "naïve"}},
		{"exit 127", []string{"exit", "127"}},
		{strings.Repeat("a", 80) + " ok", []string{"ok"}},
	}
	for _, tt := range tests {
		var got []string
		terms(tt.text, func(s string, _ int) { got = append(got, s) })
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("terms(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// recallHistory fills an index with steps..to of noisy tool output, the
// fact at step 5.
const fact = "The staging database password is kept in vault path secret/ci/pg-staging, rotated 2026-03-01."

func addNoise(x *Index, from, to int) {
	for s := from; s <= to; s++ {
		x.Add(s, "tool_call", fmt.Sprintf(`{"cmd": "go test ./pkg%d/..."}`, s%17))
		out := filler(s, 2000+(s*7919)%6000)
		if s == 5 {
			out = out[:1000] + "\n" + fact + "\n" + out[1000:]
		}
		x.Add(s, "tool_result", out)
	}
}

func TestRecallFindsOldFact(t *testing.T) {
	var x Index
	begin := time.Now()
	addNoise(&x, 1, 1900)
	added := time.Since(begin)
	for _, q := range []string{"database password", "where is the staging DB password?", "pg-staging", "secret/ci"} {
		begin = time.Now()
		hits := x.Search(q, 5)
		t.Logf("%q: %d entries indexed in %v, searched in %v", q, x.Len(), added, time.Since(begin))
		if len(hits) == 0 || hits[0].Step != 5 || hits[0].Kind != "tool_result" {
			t.Fatalf("%q: hits %+v, want step 5 first", q, hits)
		}
		if !strings.Contains(hits[0].Snippet, "password") && !strings.Contains(hits[0].Snippet, "pg-staging") {
			t.Fatalf("%q: snippet %q misses the fact", q, hits[0].Snippet)
		}
	}
}

func TestSearchEdges(t *testing.T) {
	var x Index
	if hits := x.Search("anything", 3); hits != nil {
		t.Fatalf("empty index: %v", hits)
	}
	x.Add(1, "model", "Build failed: undefined: parseConfig in cmd/main.go")
	x.Add(2, "model", "parse the config file")
	x.Add(3, "model", "")
	tests := []struct {
		query string
		k     int
		steps []int
	}{
		{"", 3, nil},
		{"!!!", 3, nil},
		{"nothinglikethis", 3, nil},
		{"parseConfig", 3, []int{1, 2}},
		{"parse config", 1, []int{2}},
	}
	for _, tt := range tests {
		var steps []int
		for _, h := range x.Search(tt.query, tt.k) {
			steps = append(steps, h.Step)
		}
		if !reflect.DeepEqual(steps, tt.steps) {
			t.Errorf("Search(%q) steps %v, want %v", tt.query, steps, tt.steps)
		}
	}
}

func TestSnippet(t *testing.T) {
	text := strings.Repeat("noise words here\n", 100) + "the answer is 42 exactly\n" + strings.Repeat("more noise\n", 100)
	s := snippet(text, []string{"answer", "42"})
	if !strings.Contains(s, "the answer is 42 exactly") || len(s) > snippetLen+8 || !strings.HasPrefix(s, "…") {
		t.Fatalf("snippet %q", s)
	}
}

package memory

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// BM25 parameters, the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// snippetLen is about how many bytes of text a hit shows.
const snippetLen = 240

// Index is an incremental BM25 index over a job's history entries (model
// messages, tool calls, tool results), for the recall tool. It keeps each
// entry's text (a reference, not a copy) to cut snippets from. It is safe
// for concurrent use; the zero value is empty and ready.
type Index struct {
	mu    sync.RWMutex
	docs  []doc
	post  map[string][]posting
	total int // terms in all docs
}

type doc struct {
	step   int
	kind   string
	text   string
	length int // terms
}

type posting struct{ doc, tf int32 }

// Hit is one entry matching a search.
type Hit struct {
	Step    int     `json:"step"`
	Kind    string  `json:"kind"`
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
}

// Add indexes one entry of step. Its cost is linear in the text.
func (x *Index) Add(step int, kind, text string) {
	tf := map[string]int32{}
	n := 0
	terms(text, func(t string, _ int) {
		tf[t]++
		n++
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.post == nil {
		x.post = map[string][]posting{}
	}
	id := int32(len(x.docs))
	x.docs = append(x.docs, doc{step: step, kind: kind, text: text, length: n})
	x.total += n
	for t, c := range tf {
		x.post[t] = append(x.post[t], posting{id, c})
	}
}

// Step returns the entries of one step, each cut to at most max bytes
// (head and tail), in the order they were added.
func (x *Index) Step(step, max int) []Hit {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Hit
	for _, d := range x.docs {
		if d.step == step {
			text := d.text
			if len(text) > max {
				text = cutMiddle(text, max, func(n int) string { return fmt.Sprintf("\n[… %d bytes cut …]\n", n) })
			}
			out = append(out, Hit{Step: d.step, Kind: d.kind, Snippet: text})
		}
	}
	return out
}

// Len is how many entries are indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.docs)
}

// Search returns the k entries best matching query by BM25, best first
// (ties: the earlier entry), each with a snippet around its best match.
func (x *Index) Search(query string, k int) []Hit {
	q := queryTerms(query)
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(q) == 0 || len(x.docs) == 0 || k <= 0 {
		return nil
	}
	scores := x.score(q)
	var ids []int32
	for id, s := range scores {
		if s > 0 {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if scores[a] != scores[b] {
			if scores[a] > scores[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	hits := make([]Hit, 0, min(k, len(ids)))
	for _, id := range ids[:min(k, len(ids))] {
		d := x.docs[id]
		hits = append(hits, Hit{Step: d.step, Kind: d.kind, Snippet: snippet(d.text, q), Score: scores[id]})
	}
	return hits
}

// score adds up every entry's BM25 score for the query terms.
func (x *Index) score(q []string) []float64 {
	n := float64(len(x.docs))
	avg := math.Max(float64(x.total)/n, 1)
	scores := make([]float64, len(x.docs))
	for _, t := range q {
		ps := x.post[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(x.docs[p.doc].length)/avg)
			scores[p.doc] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	return scores
}

// queryTerms returns the distinct terms of a query, in order.
func queryTerms(query string) []string {
	var q []string
	terms(query, func(t string, _ int) {
		if !slices.Contains(q, t) {
			q = append(q, t)
		}
	})
	return q
}

// snippet cuts about snippetLen bytes of text around the place where the
// most distinct query terms occur close together.
func snippet(text string, q []string) string {
	type match struct{ at, term int }
	var ms []match
	terms(text, func(t string, at int) {
		if i := slices.Index(q, t); i >= 0 {
			ms = append(ms, match{at, i})
		}
	})
	best, bestN := 0, 0
	for i := 0; i < len(ms) && bestN < min(len(q), 64); i++ {
		var seen uint64
		for _, o := range ms[i:] {
			if o.at-ms[i].at > snippetLen*2/3 {
				break
			}
			seen |= 1 << (o.term % 64)
		}
		if n := bits.OnesCount64(seen); n > bestN {
			best, bestN = ms[i].at, n
		}
	}
	return excerpt(text, best-snippetLen/4)
}

// excerpt returns snippetLen bytes of text from about start, on character
// boundaries, with whitespace runs folded and "…" where it was cut.
func excerpt(text string, start int) string {
	start = max(start, 0)
	end := min(start+snippetLen, len(text))
	start, end = tailStart(text, start, end), headEnd(text, start, end)
	s := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}

// Package llmtest is the scripted language model of the test suite: an
// httptest server that speaks the Anthropic Messages and OpenAI Chat
// Completions wire formats at once, streaming and not, and answers each
// request with the next turn of a script. The production clients
// (llm/anthropic, llm/openai) talk to it over real HTTP, so a test exercises
// everything but the model itself.
//
// The server stands in for the real APIs, so it is at least as strict: it
// checks every request is well formed for its format (required fields, tool
// results answering the tool calls just before them, images, tool schemas,
// Anthropic's computer-use tool and the beta header it needs) and fails the
// test loudly otherwise. A script that runs out, a step no
// branch of which matches, or a request an OnRequest hook rejects is a test
// bug, reported with t.Errorf.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
)

// Script is what the model answers, one step per request.
type Script struct {
	Steps []Step
}

// Step answers one request with the first of its branches whose When
// matches. A Repeat step is never used up: it answers every later request,
// for a model that never finishes.
type Step struct {
	Branches []Turn
	Repeat   bool
}

// Turn is one answer of the model: text, tool calls, or an HTTP error.
type Turn struct {
	// When chooses this branch; nil matches every request.
	When *Match
	// Text is streamed in small deltas, before the tool calls.
	Text string
	// ToolCalls are the calls the model makes; their IDs are generated.
	ToolCalls []ToolCall
	// Usage is reported as the call's usage; nil estimates it from the
	// request and answer sizes (4 bytes a token).
	Usage *llm.Usage

	// Status, when set, makes the server answer this HTTP error status
	// instead (429, 401, 404, 529, 503...), with an error body of
	// ErrorType (default: the format's type for the status).
	Status    int
	ErrorType string
	// RetryAfter is sent as Retry-After (whole seconds) and, when it is
	// not a whole number of seconds, as retry-after-ms too.
	RetryAfter time.Duration
	// MidStream sends ErrorType (default overloaded_error, or server_error
	// in the OpenAI format) as an error event after the text, in a
	// response that started fine (HTTP 200). A non-streamed request gets
	// the HTTP status the error type stands for instead.
	MidStream bool
	// Stall stops the stream after the text until the client goes away
	// (or the test ends), for testing cancellation.
	Stall bool
}

// ToolCall is a call the model makes; Input is marshalled to JSON.
type ToolCall struct {
	Name  string
	Input any
}

// Match selects a branch by the last tool result in the request.
type Match struct {
	// ResultContains must be a substring of the result's text.
	ResultContains string
	// ResultError, when set, must equal the result's IsError.
	ResultError *bool
	// NoTools matches a request that defines no tools (a summarizer's),
	// whatever its messages.
	NoTools bool
}

// Say returns a turn that answers text and ends the turn.
func Say(text string) Turn {
	return Turn{Text: text}
}

// Call returns a turn that calls one tool.
func Call(name string, input any) Turn {
	return Turn{ToolCalls: []ToolCall{{Name: name, Input: input}}}
}

// Steps returns a script of one single-branch step per turn.
func Steps(turns ...Turn) Script {
	var s Script
	for _, t := range turns {
		s.Steps = append(s.Steps, Step{Branches: []Turn{t}})
	}
	return s
}

// Recorded is one request the server received, decoded into the common form.
type Recorded struct {
	Format   string // "anthropic" or "openai"
	Stream   bool
	Model    string
	System   string
	Messages []llm.Message
	Tools    []string
	// ToolSpecs are the tools as defined in the request, in order: a
	// function tool's name, description and input schema, or for a
	// provider-native tool (Anthropic's computer use) its name and Native.
	ToolSpecs []llm.Tool
	// Beta are the features the anthropic-beta header asked for.
	Beta []string
	// MaxTokens is the output limit the request asked for (0: none).
	MaxTokens int
	// APIKey is the key the request carried (x-api-key or a bearer token).
	APIKey   string
	RawBytes int
	// Body is the request body as sent, for checks on wire details.
	Body []byte
	At   time.Time
}

// Server is the scripted model. It is safe for concurrent requests.
type Server struct {
	t       testing.TB
	srv     *httptest.Server
	closing chan struct{}

	mu      sync.Mutex
	script  Script
	step    int
	reqs    []Recorded
	hook    func(Recorded) error
	counter int
}

// New starts a server answering script; it is closed when the test ends.
func New(t testing.TB, script Script) *Server {
	t.Helper()
	s := &Server{t: t, script: script, closing: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.serveAnthropic)
	mux.HandleFunc("POST /v1/chat/completions", s.serveOpenAI)
	mux.HandleFunc("/", s.serveUnknown)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.closing) // ends stalled answers whose client never left
		s.srv.Close()
	})
	return s
}

// AnthropicURL is the base URL for an Anthropic client.
func (s *Server) AnthropicURL() string { return s.srv.URL }

// OpenAIURL is the base URL for an OpenAI client (it ends in /v1).
func (s *Server) OpenAIURL() string { return s.srv.URL + "/v1" }

// Requests returns every request received so far, in order, including those
// answered with a scripted error.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// OnRequest installs a check run on every well-formed request before it is
// answered. An error fails the request with 400 and the test with t.Errorf.
func (s *Server) OnRequest(check func(Recorded) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = check
}

// Remaining is how many steps of the script are still unused.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script.Steps) - s.step
}

// serveUnknown answers paths neither API has, as the real ones do.
func (s *Server) serveUnknown(w http.ResponseWriter, r *http.Request) {
	s.t.Errorf("llmtest: request to unknown endpoint %s %s", r.Method, r.URL.Path)
	w.Header().Set("x-should-retry", "false")
	http.Error(w, "404 page not found", http.StatusNotFound)
}

// admit records a well-formed request, runs the hook and picks the turn
// that answers it. An error is a test bug: the caller answers with status.
func (s *Server) admit(rec Recorded) (t Turn, ids []string, status int, err error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	n, hook := len(s.reqs), s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(rec); err != nil {
			s.t.Errorf("llmtest: request %d (%s) rejected by OnRequest: %v", n, rec.Format, err)
			return Turn{}, nil, http.StatusBadRequest, fmt.Errorf("rejected by the test's OnRequest check: %w", err)
		}
	}
	t, ids, err = s.next(rec)
	if err != nil {
		s.t.Errorf("llmtest: request %d (%s): %v", n, rec.Format, err)
		return Turn{}, nil, http.StatusInternalServerError, err
	}
	return t, ids, 0, nil
}

// next advances the script and returns the turn answering rec, with an ID
// for each of its tool calls.
func (s *Server) next(rec Recorded) (Turn, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step >= len(s.script.Steps) {
		return Turn{}, nil, fmt.Errorf("script exhausted: all %d steps used; last message: %s",
			len(s.script.Steps), describeLast(rec.Messages))
	}
	step := s.script.Steps[s.step]
	result, found := lastToolResult(rec.Messages)
	for _, t := range step.Branches {
		if t.When.matches(rec, result, found) {
			if !step.Repeat {
				s.step++
			}
			return t, s.newIDs(rec.Format, len(t.ToolCalls)), nil
		}
	}
	return Turn{}, nil, fmt.Errorf("step %d: no branch matches the last tool result %s",
		s.step, describeResult(result, found))
}

// newIDs returns n tool-call IDs in the style of format. s.mu is held.
func (s *Server) newIDs(format string, n int) []string {
	prefix := "toolu_"
	if format == formatOpenAI {
		prefix = "call_"
	}
	ids := make([]string, n)
	for i := range ids {
		s.counter++
		ids[i] = fmt.Sprintf("%sllmtest%04d", prefix, s.counter)
	}
	return ids
}

func (m *Match) matches(rec Recorded, result llm.Block, found bool) bool {
	if m == nil {
		return true
	}
	if m.NoTools {
		return len(rec.Tools) == 0
	}
	if !found {
		return false
	}
	if m.ResultError != nil && *m.ResultError != result.IsError {
		return false
	}
	return strings.Contains(result.Text, m.ResultContains)
}

// lastToolResult finds the last tool result in msgs.
func lastToolResult(msgs []llm.Message) (llm.Block, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		for j := len(c) - 1; j >= 0; j-- {
			if c[j].Type == llm.BlockToolResult {
				return c[j], true
			}
		}
	}
	return llm.Block{}, false
}

func describeResult(b llm.Block, found bool) string {
	if !found {
		return "(the request has no tool result)"
	}
	return fmt.Sprintf("(is_error=%v) %q", b.IsError, clip(b.Text, 200))
}

func describeLast(msgs []llm.Message) string {
	if len(msgs) == 0 {
		return "(none)"
	}
	m := msgs[len(msgs)-1]
	data, _ := json.Marshal(m.Content)
	return fmt.Sprintf("%s %s", m.Role, clip(string(data), 300))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

package event

import (
	"encoding/json"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
)

// The types of event the model agent adds to a job's log. A job cut off by
// a restart, or continued by a follow-up message, is resumed from them:
// Model, ToolResult and Notice (Said) rebuild its conversation, with the
// user's messages (Message) where Model's Seen puts them; Condensation
// rebuilds its context state.
const (
	TypeModel        = "model"
	TypeToolCall     = "tool_call"
	TypeToolResult   = "tool_result"
	TypeNotice       = "notice"
	TypeCondensation = "condensation"
)

// Model is the model's answer of one step. Seen is the seq of the last
// event of the job's log the agent had read for the user's messages
// (Message) before it asked: every message up to it was in the request,
// after the tool results of the step before. Rebuild places them there.
type Model struct {
	DurationMS int64       `json:"duration_ms"`
	Message    llm.Message `json:"message"`
	Seen       int64       `json:"seen,omitempty"`
	Step       int         `json:"step"`
	StopReason string      `json:"stop_reason"`
	Usage      llm.Usage   `json:"usage"`
}

// ToolCall is a call the model made, before it runs.
type ToolCall struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
	Name  string          `json:"name"`
	Step  int             `json:"step"`
}

// ToolResult is what a call returned to the model. Images counts the
// images it carried (they are not in the log); Media names those the host
// kept for the job's timeline (GET /v1/jobs/{id}/media/{name}), in order:
// fewer than Images when some were skipped (not PNG or JPEG, too large,
// the job's limit reached).
type ToolResult struct {
	DurationMS int64    `json:"duration_ms"`
	ID         string   `json:"id"`
	Images     int      `json:"images"`
	IsError    bool     `json:"is_error"`
	Media      []string `json:"media,omitempty"`
	Name       string   `json:"name"`
	Step       int      `json:"step"`
	Text       string   `json:"text"`
}

// Notice is what agentbox told the model on its own (a nudge, a retry, a
// repeated failure, a resume). Said is true when Text was added to the
// conversation as a message of its own, so a resumed job says it again.
type Notice struct {
	Said bool   `json:"said,omitempty"`
	Step int    `json:"step"`
	Text string `json:"text"`
}

// Condensation records what the context manager did to fit the prompt
// (see memory.Condensation). State is the condensation state after it, so
// a resumed job picks it up.
type Condensation struct {
	FromStep     int          `json:"from_step"`
	Kind         string       `json:"kind"`
	Reason       string       `json:"reason"`
	State        memory.State `json:"state"`
	Step         int          `json:"step"`
	ToStep       int          `json:"to_step"`
	TokensAfter  int          `json:"tokens_after"`
	TokensBefore int          `json:"tokens_before"`
}

// EventType returns TypeModel.
func (Model) EventType() string { return TypeModel }

// EventType returns TypeToolCall.
func (ToolCall) EventType() string { return TypeToolCall }

// EventType returns TypeToolResult.
func (ToolResult) EventType() string { return TypeToolResult }

// EventType returns TypeNotice.
func (Notice) EventType() string { return TypeNotice }

// EventType returns TypeCondensation.
func (Condensation) EventType() string { return TypeCondensation }

// Package tools holds the agent's tools, one file each: its name, its
// description and input schema for the model, and how it runs in the job's
// sandbox through the guest. A tool's failure the model should see (a bad
// path, a non-zero exit, an edit that matches nothing) is a Result with
// IsError set, never a Go error; a Go error means the sandbox broke.
package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// Tool is one capability offered to the model.
type Tool interface {
	// Spec is what the model is told about the tool.
	Spec() llm.Tool
	// Run executes one call with the model's JSON input.
	Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error)
}

// Env is what a tool runs against.
type Env struct {
	Guest *guest.Client
	// Timeout is the default command timeout (bash, run_code); default 2m.
	Timeout time.Duration
	// MaxOutput caps the text of one result shown to the model (default 30,000 bytes).
	MaxOutput int
	// SpillDir, when set (relative to /workspace), is where a command's
	// output too large to show is saved whole (up to SpillCapture bytes a
	// stream), and the model is told the file's path.
	SpillDir string
	// Network, when the job can reach out through the egress proxy, says
	// which connections the proxy refused, for the hint a failed command's
	// result gets; nil means the job has no network.
	Network NetworkDenials
	// Output, if set, is given a command's output as it is produced
	// ("stdout" or "stderr" and a chunk; bash and run_code), for whoever
	// watches the step; the result still carries the output the model
	// sees. It must not block long: the command's output waits on it.
	Output func(stream string, p []byte)
}

// SpillCapture is how much of each output stream is captured for spilling.
const SpillCapture = 1 << 20

// Result is what the model sees of a call.
type Result struct {
	Text    string
	IsError bool
	Images  []llm.Image
	// Finish is set by the finish tool: the job ends complete with it.
	Finish *Finish
}

// Finish is the model's closing summary.
type Finish struct {
	Summary string
}

package event

import "github.com/agentbox/agentbox/internal/store"

// The types of event every job's log may contain. The agent adds its own
// (see agent.go).
const (
	TypeState   = "state"
	TypeSandbox = "sandbox"
	TypeCommand = "command"
	TypeOutput  = "output"
	TypeExit    = "exit"
	TypeLog     = "log"
	TypeDeleted = "deleted"
)

// State records a job changing state.
type State struct {
	// Attempt and Worker are set when the job starts running.
	Attempt int    `json:"attempt,omitempty"`
	Error   string `json:"error,omitempty"`
	// Reason says why a job was handed back or recovered from a dead worker.
	Reason string       `json:"reason,omitempty"`
	Status store.Status `json:"status"`
	Worker string       `json:"worker,omitempty"`
}

// Sandbox records the job's sandbox being ready. Recovered is true when a
// restarted server reattached to the sandbox of an earlier attempt.
type Sandbox struct {
	ReadyMS   int64  `json:"ready_ms"`
	Recovered bool   `json:"recovered"`
	SandboxID string `json:"sandbox_id"`
}

// Command is the script the shell agent runs.
type Command struct {
	Command string `json:"command"`
}

// Output is a piece of a command's output; Stream is "stdout" or "stderr".
type Output struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// Exit records how the shell agent's command ended.
type Exit struct {
	DurationMS int64 `json:"duration_ms"`
	ExitCode   int   `json:"exit_code"`
	OOMKilled  bool  `json:"oom_killed"`
	TimedOut   bool  `json:"timed_out"`
	Truncated  bool  `json:"truncated"`
}

// Log is a message for whoever follows the job.
type Log struct {
	Level   string `json:"level,omitempty"`
	Message string `json:"message"`
}

// Deleted records the job's data (its workspace) being removed, after its
// final state event. Reason is "api" (DELETE) or "retention".
type Deleted struct {
	Reason string `json:"reason"`
}

// EventType returns TypeState.
func (State) EventType() string { return TypeState }

// EventType returns TypeSandbox.
func (Sandbox) EventType() string { return TypeSandbox }

// EventType returns TypeCommand.
func (Command) EventType() string { return TypeCommand }

// EventType returns TypeOutput.
func (Output) EventType() string { return TypeOutput }

// EventType returns TypeExit.
func (Exit) EventType() string { return TypeExit }

// EventType returns TypeLog.
func (Log) EventType() string { return TypeLog }

// EventType returns TypeDeleted.
func (Deleted) EventType() string { return TypeDeleted }

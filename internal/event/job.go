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
	TypeGit     = "git"
	TypeMessage = "message"
	// TypeCheckpoint is new in issue 14: a checkpoint to the cluster's
	// shared blob store.
	TypeCheckpoint = "checkpoint"
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

// Output is a piece of a command's output as it is produced; Stream is
// "stdout" or "stderr". Call is the id of the agent's tool call (ToolCall)
// whose command wrote it, empty for the shell agent's script; a tool's
// output events come between its ToolCall and its ToolResult, which still
// carries the whole (capped) output the model saw.
type Output struct {
	Call   string `json:"call,omitempty"`
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

// Git records what the host did with the job's repository or starting
// state. Action is "clone", "snapshot", "commit", "push" or
// "pull_request"; Error is set when it failed (a failed push or pull
// request leaves the job complete).
type Git struct {
	Action string `json:"action"`
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	Error  string `json:"error,omitempty"`
	Ref    string `json:"ref,omitempty"`
	URL    string `json:"url,omitempty"`
}

// Message is a user's message to the job after its task: a follow-up
// that starts a new turn of an ended job, or a steer delivered to a
// running one at its next step boundary. The agent's conversation holds
// it as a user message.
type Message struct {
	Text string `json:"text"`
	Turn int    `json:"turn"`
}

// Checkpoint records a checkpoint of one of the job's trees to the blob
// store the cluster shares: Tree "workspace" (after each step, and once
// the sandbox is gone) or "git" (the host's git dir of the job). Step is
// the job's step it was taken after; Files and Bytes are the tree's,
// Uploaded and UploadedBytes what this checkpoint had to put (what changed
// since the last). Error is set when it failed: the job goes on, and a
// worker that takes it over resumes from the checkpoint before.
type Checkpoint struct {
	Bytes         int64  `json:"bytes"`
	Error         string `json:"error,omitempty"`
	Files         int    `json:"files"`
	MS            int64  `json:"ms"`
	Step          int    `json:"step"`
	Tree          string `json:"tree"`
	Uploaded      int    `json:"uploaded"`
	UploadedBytes int64  `json:"uploaded_bytes"`
}

// EventType returns TypeCheckpoint.
func (Checkpoint) EventType() string { return TypeCheckpoint }

// EventType returns TypeGit.
func (Git) EventType() string { return TypeGit }

// EventType returns TypeMessage.
func (Message) EventType() string { return TypeMessage }

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

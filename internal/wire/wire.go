// Package wire holds the REST API's request and response bodies, v1: the
// JSON that internal/api serves and internal/client sends and reads, with
// the error codes of the error body and the Duration and ByteSize types
// their fields use. It is the wire format only, kept apart from the domain
// types of internal/store so that the store can change without changing
// the API; api converts between the two. api/openapi.json describes each
// type here, and a test in api checks their JSON field names against it.
package wire

import (
	"cmp"
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/internal/netpolicy"
)

// SubmitRequest is the body of POST /v1/jobs (and of the /schedule and
// /submit aliases).
type SubmitRequest struct {
	Task     string            `json:"task"`
	Model    string            `json:"model,omitempty"`
	Limits   *Limits           `json:"limits,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Image is the sandbox image, one the operator allows
	// (AGENTBOX_IMAGES); empty for the default.
	Image string `json:"image,omitempty"`
	// WorkspaceFrom starts the job from another job's final workspace.
	WorkspaceFrom string `json:"workspace_from,omitempty"`
	// Repo starts the job from a clone of a git repository.
	Repo *Repo `json:"repo,omitempty"`
	// Isolation is the tier the job's sandbox runs under: container,
	// gvisor or microvm; empty for the server's default
	// (AGENTBOX_ISOLATION).
	Isolation string `json:"isolation,omitempty"`
	// Network is the job's egress policy; absent for the server's default
	// (AGENTBOX_EGRESS_DEFAULT).
	Network *netpolicy.Policy `json:"network,omitempty"`
}

// Repo is a repository job's code: where the host clones it from with its
// own credentials, and where it hands the result back.
type Repo struct {
	URL string `json:"url"`
	// Ref is the branch, tag or commit to start from; empty for the
	// remote's default branch.
	Ref string `json:"ref,omitempty"`
	// Branch is the branch the result is committed on; empty for
	// "agentbox/<job id>".
	Branch string `json:"branch,omitempty"`
	// Push pushes Branch when the job completes.
	Push bool `json:"push,omitempty"`
	// PullRequest opens a pull request of Branch after the push.
	PullRequest *PullRequest `json:"pull_request,omitempty"`
}

// PullRequest is the pull request a repository job opens.
type PullRequest struct {
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	Draft bool   `json:"draft,omitempty"`
}

// Git is what the host did with a job's repository.
type Git struct {
	// BaseCommit is the commit the job's diff is taken against.
	BaseCommit string `json:"base_commit,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Pushed     bool   `json:"pushed,omitempty"`
	// PullRequestURL is the pull request opened for Branch.
	PullRequestURL string `json:"pull_request_url,omitempty"`
	// Error says why the last commit, push or pull request failed; the
	// job stays complete and its diff intact.
	Error string `json:"error,omitempty"`
}

// MessageRequest is the body of POST /v1/jobs/{id}/messages: a follow-up
// to an ended job (a new turn) or a steer to a running one.
type MessageRequest struct {
	Message string `json:"message"`
}

// Limits bound one job. Zero or absent fields take the server's defaults.
// Timeout accepts a duration string ("30m") or a number of seconds and is
// always returned as a duration string; Memory accepts a size string ("2g")
// or a number of bytes and is always returned as bytes.
type Limits struct {
	Timeout  Duration `json:"timeout,omitzero"`
	MaxSteps int      `json:"max_steps,omitzero"`
	Memory   ByteSize `json:"memory,omitzero"`
	CPUs     float64  `json:"cpus,omitzero"`
	// Disk is the job's disk quota: everything its sandbox can write on
	// the host, the workspace included. Same forms as Memory.
	Disk ByteSize `json:"disk,omitzero"`
	// ContextWindow overrides the model's context window, in tokens.
	ContextWindow int `json:"context_window,omitzero"`
	// Egress bounds the bytes the job's sandbox moves through the egress
	// proxy, in and out together. Same forms as Memory.
	Egress ByteSize `json:"egress,omitzero"`
}

// SubmitResponse is the answer to POST /v1/jobs.
type SubmitResponse struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
	Links  Links  `json:"links"`
}

// Links are the URLs of a job's resources. They are root-relative unless the
// server is configured with a public base URL.
type Links struct {
	Self      string `json:"self"`
	Events    string `json:"events"`
	Artifacts string `json:"artifacts"`
	Files     string `json:"files"`
	Diff      string `json:"diff"`
	Messages  string `json:"messages"`
}

// Job is a job as the API shows it.
type Job struct {
	JobID           string            `json:"job_id"`
	Task            string            `json:"task"`
	Model           string            `json:"model,omitempty"`
	Status          string            `json:"status"`
	Limits          Limits            `json:"limits"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	Attempts        int               `json:"attempts"`
	MaxAttempts     int               `json:"max_attempts"`
	Steps           int               `json:"steps"`
	Usage           Usage             `json:"usage"`
	ContextTokens   int64             `json:"context_tokens"`
	Error           string            `json:"error,omitempty"`
	Result          string            `json:"result,omitempty"`
	CancelRequested bool              `json:"cancel_requested,omitempty"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	StartedAt       time.Time         `json:"started_at,omitzero"`
	EndedAt         time.Time         `json:"ended_at,omitzero"`
	// DeletedAt is when the job's workspace was removed (DELETE, or the
	// server's retention period); its files then answer 410.
	DeletedAt time.Time `json:"deleted_at,omitzero"`
	// Image is the job's sandbox image when it asked for one.
	Image         string `json:"image,omitempty"`
	WorkspaceFrom string `json:"workspace_from,omitempty"`
	Repo          *Repo  `json:"repo,omitempty"`
	// Git is what the host did with the job's repository: the branch,
	// the commit, the pull request, and why any of them failed.
	Git *Git `json:"git,omitempty"`
	// Turn counts the job's turns: 1, and one more per follow-up message.
	Turn int `json:"turn"`
	// Isolation is the tier the job's sandboxes run under (container,
	// gvisor, microvm).
	Isolation string `json:"isolation"`
	// Network is the egress policy in force, its mode always given
	// (PATCH /v1/jobs/{id}/network changes it).
	Network netpolicy.Policy `json:"network"`
	// Worker is the ID of the worker running the job (GET /v1/workers);
	// empty unless it is running.
	Worker string `json:"worker,omitempty"`
	// QueuePosition is a pending job's place in the queue, 1 for the next
	// one claimed; 0 (omitted) unless it is pending. Only GET
	// /v1/jobs/{id} fills it in.
	QueuePosition int   `json:"queue_position,omitempty"`
	Links         Links `json:"links"`
	// Effective is the model and limits the server applies to the job:
	// what it asked for, and the server's defaults for the rest.
	Effective *Effective `json:"effective,omitempty"`
}

// Effective is a model and limits a job runs with; as a server's
// Defaults, what it applies to a job that names none.
type Effective struct {
	// Model is "provider:name"; empty for a server without a model (or
	// whose jobs are shell scripts).
	Model  string `json:"model,omitempty"`
	Limits Limits `json:"limits"`
}

// For is what a job that asked for model and limits runs with under
// the defaults e: each of its limits, or e's where it named none.
func (e Effective) For(model string, asked Limits) Effective {
	l := e.Limits
	l.Timeout = cmp.Or(asked.Timeout, l.Timeout)
	l.MaxSteps = cmp.Or(asked.MaxSteps, l.MaxSteps)
	l.Memory = cmp.Or(asked.Memory, l.Memory)
	l.CPUs = cmp.Or(asked.CPUs, l.CPUs)
	l.Disk = cmp.Or(asked.Disk, l.Disk)
	l.ContextWindow = cmp.Or(asked.ContextWindow, l.ContextWindow)
	l.Egress = cmp.Or(asked.Egress, l.Egress)
	if model != "" {
		e.Model = model
	}
	e.Limits = l
	return e
}

// NetworkSummary is GET /v1/jobs/{id}/network: the policy in force and
// what the job's sandbox did on the network, per host and port, from its
// network events.
type NetworkSummary struct {
	Policy netpolicy.Policy `json:"policy"`
	// Hosts are by host, then port.
	Hosts []NetworkHost `json:"hosts"`
	// Connections counts the connection attempts summarised.
	Connections int `json:"connections"`
	// Truncated says the summary covers only the last 100,000 events of
	// the job's log, or lists only the first 1000 hosts.
	Truncated bool `json:"truncated,omitempty"`
}

// NetworkHost is one host and port's connection attempts.
type NetworkHost struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Allowed  int    `json:"allowed"`
	Denied   int    `json:"denied"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
	// LastDecision ("allow" or "deny") and LastReason are the latest
	// attempt's.
	LastDecision string `json:"last_decision"`
	LastReason   string `json:"last_reason,omitempty"`
}

// Worker is a process that claims and runs jobs, as GET /v1/workers lists
// it.
type Worker struct {
	WorkerID string `json:"worker_id"`
	// Address is where its internal endpoint answers (host:port).
	Address string `json:"address,omitempty"`
	// Capacity is how many jobs it runs at once; Running how many it ran
	// at its last heartbeat.
	Capacity    int       `json:"capacity"`
	Running     int       `json:"running"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Alive is whether its last heartbeat is recent: within three
	// heartbeat intervals or the lease.
	Alive bool `json:"alive"`
}

// WorkerList is GET /v1/workers, by worker ID.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}

// Usage is what a job consumed from its model, and what that cost.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// JobList is one page of GET /v1/jobs, newest first.
type JobList struct {
	Jobs []Job `json:"jobs"`
	// NextCursor is passed as ?cursor= to get the next page; empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Event is one entry of a job's log. Payload is a JSON object whose shape
// depends on Type (see docs/api.md).
type Event struct {
	JobID   string          `json:"job_id"`
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// EventPage is one page of GET /v1/jobs/{id}/events.
type EventPage struct {
	Events []Event `json:"events"`
	// NextAfter is passed as ?after= to read on: the last seq returned, or the
	// request's own after when the page is empty.
	NextAfter int64 `json:"next_after"`
	// HasMore is true when the page is full and more events may follow now.
	HasMore bool `json:"has_more"`
}

// ErrorResponse is the body of every error response.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Fields says which field of the request each problem concerns, when
	// the API knows (a form shows each message at its field).
	Fields []FieldProblem `json:"fields,omitempty"`
}

// FieldProblem is what is wrong with one field of a request.
type FieldProblem struct {
	// Field is the field's JSON path ("task", "limits.memory",
	// "repo.url", "workspace"), or a header's name.
	Field   string `json:"field"`
	Message string `json:"message"`
}

// LegacySubmitResponse is the answer of the POST /schedule and /submit aliases.
type LegacySubmitResponse struct {
	JobID string `json:"job_id"`
}

// LegacyStatus is the answer of the GET /status/{id} alias.
type LegacyStatus struct {
	Status string `json:"status"`
	// Result is the download URL of the job's artifacts once it completed.
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ViewerLinks is the answer of POST /v1/jobs/{id}/viewer: links that open
// the job's desktop (noVNC) and Jupyter in a browser. Each works once,
// until ExpiresAt (a minute); opening one sets a cookie that keeps that
// browser in the job's views for 8 hours. They are root-relative unless
// the server is configured with a public base URL.
type ViewerLinks struct {
	DesktopURL string    `json:"desktop_url"`
	JupyterURL string    `json:"jupyter_url"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Health is the answer of GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// FileList is GET /v1/jobs/{id}/files/DIR?list (or .../files/ for the
// workspace's root): one directory of the job's workspace, sorted by
// name. A running job's is read from a snapshot of its workspace taken at
// SnapshotAt.
type FileList struct {
	// Path is the directory, "" for the workspace's root.
	Path    string      `json:"path"`
	Entries []FileEntry `json:"entries"`
	// Truncated says the directory has more entries than listed.
	Truncated bool `json:"truncated,omitempty"`
	// Hidden counts the entries left out as the workspace's .gitignore
	// or a common cache directory (__pycache__, node_modules, ...)
	// would have them; ?all=1 lists them too.
	Hidden int `json:"hidden,omitempty"`
	// SnapshotAt is when the snapshot a running job's files are read
	// from was taken; zero for an ended job's workspace.
	SnapshotAt time.Time `json:"snapshot_at,omitzero"`
}

// FileEntry is one entry of a FileList, as lstat sees it: a link is
// never followed.
type FileEntry struct {
	Name string `json:"name"`
	// Type is file, dir, symlink, fifo, socket, device or other.
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode is the permission bits in octal ("0644").
	Mode  string    `json:"mode"`
	MTime time.Time `json:"mtime"`
	// Target is a symlink's target, as written.
	Target string `json:"target,omitempty"`
}

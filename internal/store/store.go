// Package store is the contract for agentbox's durable state: jobs, their
// leases, and each job's append-only event log. Implementations live in
// subpackages (sqlite/ for one host, postgres/ for several; sqlstore/ holds
// what both share) and all pass storetest.Run.
//
// Rules every implementation follows:
//   - A method that returns without error has made its write durable: a crash
//     (kill -9, power loss with the default settings) right after loses nothing.
//   - UpdateJob, ClaimJob, Heartbeat, Release and RequeueExpired are atomic:
//     concurrent callers on any number of processes never both win.
//   - Events of one job get consecutive sequence numbers from 1, never reused;
//     nothing is ever deleted from the log.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors every implementation returns; check them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict means an idempotency key was reused with another request.
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost means the caller no longer holds the job's lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNoJob means there is no pending job to claim.
	ErrNoJob = errors.New("no pending job")
	// ErrInvalid means an argument is malformed (e.g. a cursor not made by
	// ListJobs); it is the caller's fault, not the store's.
	ErrInvalid = errors.New("invalid argument")
)

// Status is a job's state: pending -> running -> complete | error | canceled.
type Status string

const (
	StatusPending  Status = "pending"
	StatusRunning  Status = "running"
	StatusComplete Status = "complete"
	StatusError    Status = "error"
	StatusCanceled Status = "canceled"
)

// Final reports whether the status is an end state.
func (s Status) Final() bool {
	return s == StatusComplete || s == StatusError || s == StatusCanceled
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	return s == StatusPending || s == StatusRunning || s.Final()
}

// Limits bound one job; zero fields take the server's defaults.
type Limits struct {
	Timeout     time.Duration `json:"timeout,omitempty"`
	MaxSteps    int           `json:"max_steps,omitempty"`
	MemoryBytes int64         `json:"memory_bytes,omitempty"`
	NanoCPUs    int64         `json:"nano_cpus,omitempty"`
	// DiskBytes is the sandbox's disk quota.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
	// ContextWindow overrides the model's context window, in tokens.
	ContextWindow int `json:"context_window,omitempty"`
	// EgressBytes bounds the bytes the job's sandbox moves through the
	// egress proxy, in and out together.
	EgressBytes int64 `json:"egress_bytes,omitempty"`
}

// Usage is what a job consumed from its model.
type Usage struct {
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// Repo is a repository job's code: where the host clones it from, and
// where it hands the result back.
type Repo struct {
	URL string `json:"url"`
	// Ref is the branch, tag or commit to start from; empty for the
	// remote's default branch.
	Ref string `json:"ref,omitempty"`
	// Branch is the branch the host commits the result on
	// ("agentbox/<job id>" when empty).
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

// Git is what the host did with a job's repository, and where the job's
// changes are measured from.
type Git struct {
	// BaseCommit is the commit the job started from, on the host's side:
	// the cloned one, or a snapshot of the starting workspace.
	BaseCommit string `json:"base_commit,omitempty"`
	// Branch and Commit are the branch the result was committed on and
	// its last commit.
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Pushed is true once Commit is on the remote.
	Pushed bool `json:"pushed,omitempty"`
	// PullRequestURL is the opened pull request.
	PullRequestURL string `json:"pull_request_url,omitempty"`
	// Error says why the last commit, push or pull request failed.
	Error string `json:"error,omitempty"`
}

// Job is one task and everything known about its execution.
type Job struct {
	ID       string
	Task     string
	Model    string
	Limits   Limits
	Metadata map[string]string
	// Image is the sandbox image the job asked for; empty for the default.
	Image string
	// Isolation is the tier the job's sandboxes run under (container,
	// gvisor, microvm): the one it asked for or the server's default,
	// resolved when it was submitted and never changed; empty for jobs
	// from before tiers, which ran as containers.
	Isolation string
	// Network is the egress policy in force for the job, as egress.Policy
	// JSON (store does not import egress); nil for none stated, or for jobs
	// from before policies. PATCH /v1/jobs/{id}/network changes it.
	Network json.RawMessage
	// WorkspaceFrom is the job whose final workspace this one starts from.
	WorkspaceFrom string
	// Repo is the repository the job starts from; nil for none.
	Repo *Repo
	// Git is what the host did with the job's repository or starting state.
	Git Git
	// Turn counts the job's turns: 1 for the task, one more for each
	// follow-up message that started it again after it ended.
	Turn   int
	Status Status
	// Attempts counts the runs started; MaxAttempts bounds them.
	Attempts    int
	MaxAttempts int
	Steps       int
	Usage       Usage
	// Error says why a job ended in error or was canceled.
	Error string
	// Result is the job's summary when it completed.
	Result string
	// ContextTokens is the size of the job's current model context.
	ContextTokens int64
	// IdempotencyKey and RequestHash dedupe submissions.
	IdempotencyKey string
	RequestHash    string
	// CancelRequested is set by a cancel; the worker running the job sees it.
	CancelRequested bool
	// LeaseOwner and LeaseUntil say which worker runs the job, until when.
	LeaseOwner string
	LeaseUntil time.Time
	// Sandbox is the driver's handle of the job's current sandbox, as JSON.
	Sandbox   json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	StartedAt time.Time // first claim
	EndedAt   time.Time
	// DeletedAt is when the job's data (its workspace) was removed, by a
	// DELETE or by the retention janitor; the record and the log stay.
	DeletedAt time.Time
}

// Event is one entry of a job's log.
type Event struct {
	JobID   string          `json:"job_id"`
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Entry is an event to append to a job's log: its type and JSON payload.
type Entry struct {
	Type    string
	Payload json.RawMessage
}

// ListOptions filters and pages ListJobs. Jobs come newest first.
type ListOptions struct {
	Status Status // empty: all
	// Query, when set, keeps the jobs whose task contains it, ignoring
	// the case of ASCII letters. At most 200 bytes.
	Query string
	Limit int // 0: 50; at most 1000
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// JobPage is one page of jobs.
type JobPage struct {
	Jobs       []Job
	NextCursor string // empty on the last page
}

// Notifier is an optional ability of a Store that several processes share
// (Postgres): it tells every process when any of them made a job pending
// (a submit, a requeue, a release) or appended an event, so idle workers
// and event followers wake at once instead of polling. A Store used by
// one process needs none: the process wakes itself.
type Notifier interface {
	// Subscribe delivers notes until ctx ends, then closes the channel.
	// Notes are hints: a slow reader may miss some (the channel is
	// buffered and never blocks the store), and readers re-read the store
	// on each. The channel also closes if the subscription breaks; the
	// caller subscribes again.
	Subscribe(ctx context.Context) (<-chan Note, error)
}

// Note is one notification of a Notifier.
type Note struct {
	// Kind is NotePending (JobID became pending) or NoteEvent (JobID's log
	// grew to Seq).
	Kind  string
	JobID string
	Seq   int64
}

// Note kinds.
const (
	NotePending = "pending"
	NoteEvent   = "event"
)

// Worker is a process that claims and runs jobs, as registered in the
// store: with several hosts, the API finds a running job's worker here.
type Worker struct {
	ID string
	// Address is where the worker's internal endpoint answers
	// (host:port), empty for a worker without one.
	Address string
	// Capacity is how many jobs it runs at once; Running how many it ran
	// at its last heartbeat.
	Capacity, Running int
	StartedAt         time.Time
	// HeartbeatAt is its last PutWorker; a worker silent for longer than
	// its lease is presumed dead.
	HeartbeatAt time.Time
}

// Store is agentbox's durable state.
type Store interface {
	// CreateJob inserts j (ID, Task, ... set by the caller; Status pending;
	// a Turn of 0 is stored as 1).
	// When j.IdempotencyKey is set and a job with that key exists, it returns
	// that job and created=false if its RequestHash matches, ErrConflict if not.
	CreateJob(ctx context.Context, j Job) (job Job, created bool, err error)
	GetJob(ctx context.Context, id string) (Job, error)
	ListJobs(ctx context.Context, opts ListOptions) (JobPage, error)
	// UpdateJob applies fn to the job inside a transaction and saves the result.
	// If fn returns an error nothing is saved and that error is returned.
	UpdateJob(ctx context.Context, id string, fn func(*Job) error) (Job, error)
	// UpdateJobLogged is UpdateJob that also appends the entries fn returns
	// to the job's log, in the same transaction: a reader sees the change
	// with its events or neither. It returns the events as appended.
	UpdateJobLogged(ctx context.Context, id string, fn func(*Job) ([]Entry, error)) (Job, []Event, error)
	// ClaimJob takes the oldest pending job: status running, Attempts+1,
	// StartedAt set if unset, leased to owner until now+lease. ErrNoJob if none.
	ClaimJob(ctx context.Context, owner string, lease time.Duration) (Job, error)
	// Heartbeat extends the lease; ErrLeaseLost if owner no longer holds it,
	// ErrNotFound for an unknown job.
	// It returns the job, so the worker sees CancelRequested.
	Heartbeat(ctx context.Context, id, owner string, lease time.Duration) (Job, error)
	// Release gives a running job back: status pending (canceled if a cancel
	// was requested), lease cleared, Attempts-1 (the run was interrupted, not
	// failed). ErrLeaseLost if owner
	// no longer holds it, ErrNotFound for an unknown job.
	Release(ctx context.Context, id, owner string) error
	// RequeueExpired finds running jobs whose lease ended before now (or whose
	// owner is reclaim, e.g. this worker's previous life) and puts each back
	// to pending, or ends it: canceled if a cancel was requested, in error
	// when it has used MaxAttempts. It returns the jobs as they were before,
	// so their stale sandboxes can be destroyed.
	RequeueExpired(ctx context.Context, now time.Time, reclaim string) ([]Job, error)
	// AppendEvent adds an event with the next sequence number of its job.
	AppendEvent(ctx context.Context, jobID, typ string, payload json.RawMessage) (Event, error)
	// Events returns up to limit events of a job with Seq > after, in order.
	Events(ctx context.Context, jobID string, after int64, limit int) ([]Event, error)
	// LastSeq returns the seq of the job's last event, 0 for a job without
	// events, ErrNotFound for an unknown job. With Events(after=LastSeq-n)
	// a reader gets a log's last n events without reading the rest.
	LastSeq(ctx context.Context, jobID string) (int64, error)
	// CountByStatus counts jobs in each status.
	CountByStatus(ctx context.Context) (map[Status]int, error)
	// QueuePosition is a pending job's place in the queue: 1 for the job
	// the next claim takes, n for the nth; 0 for a job not pending,
	// ErrNotFound for an unknown job.
	QueuePosition(ctx context.Context, id string) (int, error)
	// PutWorker registers a worker or refreshes its entry (a heartbeat),
	// every field as given; a zero StartedAt or HeartbeatAt is stored as
	// now.
	PutWorker(ctx context.Context, w Worker) error
	// Workers lists the registered workers by ID.
	Workers(ctx context.Context) ([]Worker, error)
	// RemoveWorker removes a worker's entry (it stopped cleanly); an
	// unknown ID is no error.
	RemoveWorker(ctx context.Context, id string) error
	// EndedBefore returns up to limit (0: at least 50) jobs in an end state
	// whose EndedAt is before t and whose DeletedAt is unset, oldest EndedAt
	// first, then by ID: the jobs whose data a retention period has run out
	// for. Its cost follows the jobs it returns, not those the store holds.
	EndedBefore(ctx context.Context, t time.Time, limit int) ([]Job, error)
	Close() error
}

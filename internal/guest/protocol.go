// Package guest owns the protocol between the host and the daemon inside
// every sandbox (`agentbox guest`, package daemon beneath this one), and the
// host's client of it. The protocol is HTTP/1.1 + JSON over a connection a
// Dialer opens (a unix socket in a directory the host bind-mounts, a vsock
// port, TCP with the sandbox's secret); streams are NDJSON, but for the
// upgraded connections of GET /egress and POST /exec/attach (frames, see
// protocol_attach.go). Here are its
// request and answer types, its error codes and their sentinel errors, and
// the names both sides agree on. Nothing in this package runs inside the
// sandbox: the daemon imports it, never the reverse. The daemon is not a
// privilege boundary (it runs with the agent's uid), so the client treats
// all it returns as untrusted and caps it.
package guest

import (
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is bumped on every incompatible change to the wire format.
// The client refuses a guest that speaks another version.
const ProtocolVersion = 1

// SocketName is the guest's socket file inside its state directory.
const SocketName = "guest.sock"

// DefaultMaxOutput is the per-stream cap on captured command output.
const DefaultMaxOutput = 1 << 20

// DefaultExecTimeout applies when an exec request names no timeout.
const DefaultExecTimeout = 10 * time.Minute

// Health is the answer of GET /health.
type Health struct {
	Status    string `json:"status"`
	Protocol  int    `json:"protocol"`
	Version   string `json:"version"`
	Workspace string `json:"workspace"`
	UID       int    `json:"uid"`
	PID       int    `json:"pid"`
}

// ExecRequest runs one command. Cmd is an argv; use Shell for a shell line.
type ExecRequest struct {
	Cmd []string `json:"cmd"`
	// Cwd is relative to the workspace, or absolute; empty means the workspace.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Stdin is fed to the command, then closed; nil means /dev/null.
	Stdin []byte `json:"stdin,omitempty"`
	// TimeoutMS kills the command's whole process tree when it passes;
	// 0 means DefaultExecTimeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// MaxOutput caps each of stdout and stderr; 0 means DefaultMaxOutput.
	MaxOutput int64 `json:"max_output,omitempty"`
}

// OutputLimit is the cap on each of the request's stdout and stderr.
func (r ExecRequest) OutputLimit() int64 {
	if r.MaxOutput > 0 {
		return r.MaxOutput
	}
	return DefaultMaxOutput
}

// Shell returns a request that runs line with bash -c.
func Shell(line string) ExecRequest {
	return ExecRequest{Cmd: []string{"/bin/bash", "-c", line}}
}

// ExecResult is the outcome of a command. Output is byte-exact up to the cap;
// past it, the middle is cut and replaced by a marker line.
type ExecResult struct {
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// ExitCode is the command's exit status; 128+n when killed by signal n,
	// 127 when the command was not found, 126 when it could not be started.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the command, if one did.
	Signal     string `json:"signal,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	// Canceled means the caller went away and the command was killed.
	Canceled bool `json:"canceled,omitempty"`
	// Truncated is true when either stream passed its cap; on POST
	// /exec/attach, which has none, when output still coming long after the
	// command ended (a background child it left writing) was dropped.
	Truncated   bool  `json:"truncated"`
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// OOMKilled means the kernel's out-of-memory killer ended the command.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// StartError says why the command could not be started at all.
	StartError string `json:"start_error,omitempty"`
}

// StreamEvent is one NDJSON line of POST /exec/stream: output as it is
// produced ("stdout", "stderr"), then one "exit" carrying the result without
// the output bodies, or, with ?capture=1, with them as /exec gives them
// (each stream's head and tail within its cap).
type StreamEvent struct {
	Type   string      `json:"type"`
	Data   []byte      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
}

// FileInfo describes one entry of the workspace. Path is relative to it.
type FileInfo struct {
	Path    string    `json:"path"`
	Type    string    `json:"type"` // file, dir, symlink, other
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	ModTime time.Time `json:"mtime"`
	Target  string    `json:"target,omitempty"` // symlink target, as stored
}

// Listing is the answer of GET /files/list.
type Listing struct {
	Entries   []FileInfo `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// MoveRequest renames From to To inside the workspace.
type MoveRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// SearchRequest looks for a regular expression (RE2 syntax) in the files
// below Path, like grep -rn.
type SearchRequest struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Glob       string `json:"glob,omitempty"` // matched against base names, e.g. "*.py"
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	MaxResults int    `json:"max_results,omitempty"`
}

// Match is one matching line.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is the answer of POST /files/search.
type SearchResult struct {
	Matches   []Match `json:"matches"`
	Truncated bool    `json:"truncated"`
	// Skipped counts files not searched: binary, or over the size limit.
	Skipped int `json:"skipped"`
}

// Error codes the guest answers with; the client maps them to the sentinels.
const (
	CodeBadRequest = "bad_request"
	CodeNotFound   = "not_found"
	CodePathEscape = "path_escape"
	CodeExists     = "exists"
	CodeIsDir      = "is_dir"
	CodeNotDir     = "not_dir"
	CodeTooLarge   = "too_large"
	CodeInternal   = "internal"
	// CodeService means a supervised service (the desktop, Jupyter) could
	// not be started or answered badly.
	CodeService = "service"
)

// Sentinel errors returned by the client; check them with errors.Is.
var (
	ErrBadRequest = errors.New("bad request")
	ErrNotFound   = errors.New("not found")
	ErrPathEscape = errors.New("path outside the workspace")
	ErrExists     = errors.New("already exists")
	ErrIsDir      = errors.New("is a directory")
	ErrNotDir     = errors.New("not a directory")
	ErrTooLarge   = errors.New("too large")
	// ErrService means a supervised service (the desktop, Jupyter) failed.
	ErrService = errors.New("sandbox service failed")
	// ErrProtocol means the guest speaks another protocol version.
	ErrProtocol = errors.New("guest protocol mismatch")
	// ErrUnavailable means the guest could not be reached or broke the connection.
	ErrUnavailable = errors.New("guest unavailable")
	// ErrUnsafeSocket means the guest's socket, or a directory on the way to
	// it, is not what the host made (a link, a file, a FIFO): the sandbox
	// tampered with it, and the host refuses to connect.
	ErrUnsafeSocket = errors.New("unsafe guest socket")
)

var codeErrors = map[string]error{
	CodeBadRequest: ErrBadRequest,
	CodeNotFound:   ErrNotFound,
	CodePathEscape: ErrPathEscape,
	CodeExists:     ErrExists,
	CodeIsDir:      ErrIsDir,
	CodeNotDir:     ErrNotDir,
	CodeTooLarge:   ErrTooLarge,
	CodeService:    ErrService,
}

// Error is an error answered by the guest.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool { return codeErrors[e.Code] == target }

// ErrorBody is the JSON body of every error answer: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameBash is the bash tool's name.
const NameBash = "bash"

// BashTool runs a shell command in the sandbox's workspace.
type BashTool struct{}

var bashSchema = object([]string{"command"},
	str("command", "The bash command line to run, e.g. \"python3 app.py\" or \"pip list | grep flask\". Runs with /bin/bash -c in /workspace."),
	integer("timeout_seconds", "How long the command may run before it is killed, in seconds (default 120, at most 1800). Raise it for long builds or test suites.", 1, int64(MaxTimeout.Seconds())),
)

const bashDescription = `Run a command with /bin/bash -c inside the sandbox (Debian Linux, user "agent", working directory /workspace) and get its exit code, stdout and stderr.

- Each call is a fresh shell: cd, shell variables and exports do not carry over; chain commands with && or use absolute paths. Files, installed packages and background processes do persist.
- Stdin is empty: never run interactive programs (editors, REPLs, prompts); pass flags like -y.
- The command is killed after timeout_seconds (default 120, max 1800) together with every process it started.
- Background processes are allowed and keep running between calls, e.g. a server: "python3 -m http.server 8000 > server.log 2>&1 &" returns at once. Always redirect a background process's output to a file (its output is otherwise discarded), then check it with a later call (curl -s localhost:8000, cat server.log).
- Output is capped: each stream is cut in the middle past the limit. For long output, redirect to a file and use read_file or search_files.
- The sandbox reaches only what the job's network policy allows, through the proxy set in the environment (often nothing); Python (pytest, flask, requests, numpy, pandas), Node.js with TypeScript, git, curl and build tools are installed.
- Prefer read_file, write_file, edit_file, list_files and search_files over cat, echo >, sed, ls and grep for files.
A non-zero exit code is reported as an error.`

// Spec describes the bash tool to the model.
func (BashTool) Spec() llm.Tool { return bashSpec }

var bashSpec = spec(NameBash, bashDescription, bashSchema)

type bashInput struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// Run executes the command and reports its exit code and output.
func (BashTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in bashInput
	if r, ok := decodeInput(NameBash, bashSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if in.Command == "" {
		return errorf("bash: command is empty"), nil
	}
	timeout := env.timeout(in.TimeoutSeconds)
	since := time.Now()
	res, err := run(ctx, g, guest.Shell(in.Command), timeout, env.captureMax(), env.Output)
	if err != nil && ctx.Err() != nil {
		return Result{Text: cutText(ctx, res, env.maxOutput()), IsError: true}, err
	}
	if err != nil {
		return failure(NameBash, err)
	}
	text := execTextSpill(res, timeout, env.maxOutput(), spillOutput(ctx, env, res))
	return env.withDenials(since, Result{Text: text, IsError: res.ExitCode != 0 || res.TimedOut}), nil
}

package tools

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameRunCode is the run_code tool's name.
const NameRunCode = "run_code"

// RunCodeTool runs a Python or TypeScript snippet.
type RunCodeTool struct{}

var runCodeSchema = object([]string{"language", "code"},
	enum("language", "The snippet's language: \"python\" (python3) or \"typescript\" (compiled with tsc, run with node).", "python", "typescript"),
	str("code", "The complete program to run. Print what you want to see."),
	integer("timeout_seconds", "How long the program may run before it is killed, in seconds (default 120, at most 1800).", 1, int64(MaxTimeout.Seconds())),
)

const runCodeDescription = `Run a short Python or TypeScript program in the sandbox and get its exit code, stdout and stderr; good for quick computations, checks and experiments that need no file of their own.

- python: runs with python3 (3.11; pytest, flask, requests, numpy, pandas installed). Modules in /workspace can be imported.
- typescript: compiled with tsc (target ES2020, module commonjs, strict off, Node.js types available), then run with node. A type error is reported as a compile error and the code is not run.
- The snippet is saved to a temporary directory outside the workspace and deleted afterwards; the working directory is /workspace, so relative paths in the code refer to workspace files. Code that should be kept belongs in a file (write_file) run with bash.
- Stdin is empty; the program is killed after timeout_seconds (default 120, max 1800). An exception or a non-zero exit is reported as an error, with the traceback.`

// Spec describes the run_code tool to the model.
func (RunCodeTool) Spec() llm.Tool { return runCodeSpec }

var runCodeSpec = spec(NameRunCode, runCodeDescription, runCodeSchema)

type runCodeInput struct {
	Language       string `json:"language"`
	Code           string `json:"code"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// Run saves the snippet to a temporary directory, compiles it if it is
// TypeScript, runs it and removes the directory.
func (RunCodeTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in runCodeInput
	if r, ok := decodeInput(NameRunCode, runCodeSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(in.Code) == "" {
		return errorf("run_code: code is empty"), nil
	}
	s := &snippet{g: g, dir: "/tmp/agentbox-run-" + strings.ToLower(rand.Text()[:16]),
		timeout: env.timeout(in.TimeoutSeconds), max: env.maxOutput(), out: env.Output}
	defer s.cleanup(ctx)
	since := time.Now()
	run := s.python
	if in.Language == "typescript" {
		run = s.typescript
	}
	r, err := run(ctx, in.Code)
	return env.withDenials(since, r), err
}

// snippet is one run_code call's temporary directory in the sandbox.
type snippet struct {
	g       *guest.Client
	dir     string
	timeout time.Duration
	max     int
	out     func(stream string, p []byte) // Env.Output
}

const (
	saveScript   = `mkdir -m 700 -p "$1" && cat > "$1/$2"`
	pythonScript = `PYTHONPATH="/workspace${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$1/snippet.py"`
	nodeScript   = `NODE_PATH="/workspace/node_modules${NODE_PATH:+:$NODE_PATH}" exec node --enable-source-maps "$1/out/snippet.js"`
	// tscScript finds Node.js's type definitions where Debian or npm put
	// them, so that process, require and the built-in modules type-check.
	tscScript = `types=
for r in /usr/share/nodejs/@types /usr/lib/node_modules/@types /usr/local/lib/node_modules/@types; do
  if [ -d "$r/node" ]; then types="--typeRoots $r --types node"; break; fi
done
exec tsc --target ES2020 --module commonjs --strict false --esModuleInterop --skipLibCheck --sourceMap --pretty false $types --outDir "$1/out" "$1/snippet.ts"`
)

func (s *snippet) python(ctx context.Context, code string) (Result, error) {
	if r, ok, err := s.save(ctx, "snippet.py", code); !ok || err != nil {
		return r, err
	}
	return s.exec(ctx, pythonScript)
}

func (s *snippet) typescript(ctx context.Context, code string) (Result, error) {
	if r, ok, err := s.save(ctx, "snippet.ts", code); !ok || err != nil {
		return r, err
	}
	req := s.shell(tscScript)
	req.Cwd = s.dir // tsc names files relative to its working directory
	res, err := run(ctx, s.g, req, s.timeout, s.max, s.out)
	if err != nil {
		return s.failure(ctx, res, err)
	}
	switch {
	case res.TimedOut || res.StartError != "":
		return Result{Text: s.clean("TypeScript compilation did not finish; the code was not run:\n" + execText(res, s.timeout, s.max)), IsError: true}, nil
	case res.ExitCode != 0:
		msg := fmt.Sprintf("TypeScript compile error (tsc exit code %d); the code was not run:\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		return Result{Text: s.clean(Truncate(msg, s.max)), IsError: true}, nil
	}
	return s.exec(ctx, nodeScript)
}

// save writes the code into the snippet's directory.
func (s *snippet) save(ctx context.Context, name, code string) (Result, bool, error) {
	req := s.shell(saveScript, name)
	req.Stdin = []byte(code)
	res, err := run(ctx, s.g, req, time.Minute, s.max, nil)
	if err != nil {
		r, err := failure(NameRunCode, err)
		return r, false, err
	}
	if res.ExitCode != 0 {
		return errorf("run_code: could not save the snippet in %s: %s", s.dir, res.Stderr), false, nil
	}
	return Result{}, true, nil
}

// exec runs the program and reports it like bash does.
func (s *snippet) exec(ctx context.Context, script string) (Result, error) {
	req := s.shell(script)
	req.Env = map[string]string{"PYTHONUNBUFFERED": "1"} // keep the output of a program killed at its timeout
	res, err := run(ctx, s.g, req, s.timeout, s.max, s.out)
	if err != nil {
		return s.failure(ctx, res, err)
	}
	return Result{Text: s.clean(execText(res, s.timeout, s.max)), IsError: res.ExitCode != 0 || res.TimedOut}, nil
}

// failure is the result of a run that did not end on its own: cut by
// ctx's end (with the output it had), or a broken guest.
func (s *snippet) failure(ctx context.Context, res guest.ExecResult, err error) (Result, error) {
	if ctx.Err() != nil {
		return Result{Text: s.clean(cutText(ctx, res, s.max)), IsError: true}, err
	}
	return failure(NameRunCode, err)
}

// shell runs script with the snippet's directory as $1 and args after it.
func (s *snippet) shell(script string, args ...string) guest.ExecRequest {
	return guest.ExecRequest{Cmd: append([]string{"/bin/bash", "-c", script, NameRunCode, s.dir}, args...)}
}

// clean shows the snippet's files by name, not by their temporary path.
func (s *snippet) clean(text string) string {
	text = strings.ReplaceAll(text, s.dir+"/out/", "")
	return strings.ReplaceAll(text, s.dir+"/", "")
}

// cleanup removes the snippet's directory, even when ctx has ended.
func (s *snippet) cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = s.g.Exec(ctx, guest.ExecRequest{Cmd: []string{"rm", "-rf", s.dir}, TimeoutMS: 20_000})
}

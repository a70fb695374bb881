package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/testenv"
)

var guestBinary string

// TestMain builds the guest binary and, after the tests, destroys the
// sandbox they shared (t.Cleanup cannot outlive one test).
func TestMain(m *testing.M) { testenv.MainWithGuest(mainRunner{m}, &guestBinary) }

type mainRunner struct{ m *testing.M }

func (r mainRunner) Run() int {
	code := r.m.Run()
	shared.teardown()
	return code
}

// shared is one Docker sandbox for the whole package: tests work in
// directories of their own in its workspace, so they do not interfere.
var shared sharedSandbox

type sharedSandbox struct {
	once   sync.Once
	dir    string
	driver *docker.Driver
	sb     sandbox.Sandbox
	err    error
}

func (s *sharedSandbox) setup() {
	s.dir, s.err = os.MkdirTemp("", "abt") // short: sandbox socket paths are limited
	if s.err != nil {
		return
	}
	s.driver, s.err = docker.New(docker.Config{Image: testenv.Image(), GuestBinary: guestBinary,
		StateDir: filepath.Join(s.dir, "sandboxes"), Instance: "toolstest-" + filepath.Base(s.dir)})
	if s.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.sb, s.err = sandbox.Start(ctx, s.driver, sandbox.Spec{}, sandbox.Binding{JobID: "tools-test"})
}

func (s *sharedSandbox) teardown() {
	if s.sb != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.sb.Destroy(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "destroy sandbox:", err)
		}
	}
	if s.driver != nil {
		s.driver.Close()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// sandboxEnv returns an Env on the shared sandbox and a directory of the
// workspace for this test alone, skipping when Docker is missing.
func sandboxEnv(t *testing.T) (*tools.Env, string) {
	t.Helper()
	testenv.DockerWithImage(t)
	shared.once.Do(shared.setup)
	if shared.err != nil {
		t.Fatalf("shared sandbox: %v", shared.err)
	}
	env := &tools.Env{Guest: shared.sb.Guest()}
	dir := "t/" + regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	sh(t, env, "rm -rf "+dir+" && mkdir -p "+dir)
	return env, dir
}

// call runs tool with input (a string of JSON, or a value to encode),
// failing the test on a Go error.
func call(t *testing.T, env *tools.Env, tool tools.Tool, input any) tools.Result {
	t.Helper()
	res, err := tool.Run(context.Background(), env, raw(t, input))
	if err != nil {
		t.Fatalf("%s: Go error: %v", tool.Spec().Name, err)
	}
	return res
}

func raw(t *testing.T, input any) json.RawMessage {
	t.Helper()
	if s, ok := input.(string); ok {
		return json.RawMessage(s)
	}
	b, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sh runs a setup command with the bash tool and fails the test if it fails.
func sh(t *testing.T, env *tools.Env, command string) string {
	t.Helper()
	res := call(t, env, tools.BashTool{}, map[string]any{"command": command})
	if res.IsError {
		t.Fatalf("setup %q failed:\n%s", command, res.Text)
	}
	return res.Text
}

// obj is shorthand for a tool's input.
type obj = map[string]any

// toolCase is one call of a tool and what its result must say.
type toolCase struct {
	name    string
	input   obj
	isError bool
	want    []string // in the text
	never   []string // not in the text
}

// runCases calls tool with each case's input, in a subtest each.
func runCases(t *testing.T, env *tools.Env, tool tools.Tool, cases []toolCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, env, tool, c.input)
			wantText(t, res, c.isError, c.want...)
			wantNot(t, res, c.never...)
		})
	}
}

func wantText(t *testing.T, res tools.Result, isError bool, parts ...string) {
	t.Helper()
	if res.IsError != isError {
		t.Errorf("IsError = %v, want %v; text:\n%s", res.IsError, isError, res.Text)
	}
	for _, p := range parts {
		if !strings.Contains(res.Text, p) {
			t.Errorf("text lacks %q:\n%s", p, res.Text)
		}
	}
}

func wantNot(t *testing.T, res tools.Result, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if strings.Contains(res.Text, p) {
			t.Errorf("text has %q:\n%s", p, res.Text)
		}
	}
}

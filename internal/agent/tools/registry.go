package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// Options configure the default tools.
type Options struct {
	// DisplayWidth and DisplayHeight are the sandbox's screen size in
	// pixels, as its sandbox.Spec's Display says (zero: 1024x768).
	DisplayWidth, DisplayHeight int
}

// Default returns the standard tools for a sandbox of the default display
// size; see DefaultFor.
func Default() []Tool { return DefaultFor(Options{}) }

// DefaultFor returns the standard tools, in the order the model is shown
// them: the shell first, then files, then code (snippets, the notebook
// kernel), then the desktop, then finish.
func DefaultFor(o Options) []Tool {
	return []Tool{
		BashTool{},
		ReadFileTool{},
		WriteFileTool{},
		EditFileTool{},
		ListFilesTool{},
		SearchFilesTool{},
		RunCodeTool{},
		PythonTool{},
		ComputerTool{Width: o.DisplayWidth, Height: o.DisplayHeight},
		FinishTool{},
	}
}

// aliases are names models call tools by that are not theirs: the names
// of the same tools elsewhere. They are accepted, never advertised.
var aliases = map[string]string{
	"desktop":  NameComputer,
	"jupyter":  NamePython,
	"notebook": NamePython,
}

// Find returns the tool of tools named name, or the one name is an alias of.
func Find(tools []Tool, name string) (Tool, bool) {
	for _, t := range tools {
		if t.Spec().Name == name {
			return t, true
		}
	}
	if real, ok := aliases[name]; ok {
		return Find(tools, real)
	}
	return nil, false
}

// Specs returns what the model is told about tools, in order.
func Specs(tools []Tool) []llm.Tool {
	out := make([]llm.Tool, len(tools))
	for i, t := range tools {
		out[i] = t.Spec()
	}
	return out
}

// Call runs the tool of tools named name with the model's input. A name the
// model made up is a Result with IsError listing the real ones, and the
// result's text is capped at env.MaxOutput, so whatever the model sends, it
// gets an answer it can read. The error is a Go error only when the sandbox
// broke or ctx ended.
func Call(ctx context.Context, env *Env, tools []Tool, name string, input json.RawMessage) (Result, error) {
	t, ok := Find(tools, name)
	if !ok {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Spec().Name
		}
		return errorf("there is no tool named %q; the tools are: %s", name, strings.Join(names, ", ")), nil
	}
	res, err := t.Run(ctx, env, input)
	if err != nil {
		return Result{}, fmt.Errorf("tool %s: %w", name, err)
	}
	max := DefaultMaxOutput
	if env != nil {
		max = env.maxOutput()
	}
	res.Text = Truncate(res.Text, max)
	return res, nil
}

package tools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// NameFinish is the finish tool's name.
const NameFinish = "finish"

// FinishTool ends the job: its summary is the job's result.
type FinishTool struct{}

var finishSchema = object([]string{"summary"},
	str("summary", "What was done and where the results are: the files created or changed, how to run them, test results, and anything left undone or to watch out for."),
)

const finishDescription = `Declare the task complete and end the job. Call it once, only when the work is done and checked (for example, the code runs and its tests pass), or when the task cannot be done, saying why.

The summary is the final report the user reads: what you did, which files in /workspace hold the result, how to use them, and any caveats. Nothing runs after this call; files in /workspace are delivered as the job's artifacts.`

// Spec describes the finish tool to the model.
func (FinishTool) Spec() llm.Tool { return finishSpec }

var finishSpec = spec(NameFinish, finishDescription, finishSchema)

type finishInput struct {
	Summary string `json:"summary"`
}

// Run returns the Finish that ends the job.
func (FinishTool) Run(_ context.Context, _ *Env, input json.RawMessage) (Result, error) {
	var in finishInput
	if r, ok := decodeInput(NameFinish, finishSchema, input, &in); !ok {
		return r, nil
	}
	summary := strings.TrimSpace(in.Summary)
	if summary == "" {
		return errorf("finish: summary is empty; describe what was done and where the results are"), nil
	}
	return Result{Text: "The task is marked as finished.", Finish: &Finish{Summary: summary}}, nil
}

package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// noop is a tool that does nothing, so a step's tool time is ~0.
type noop struct{}

func (noop) Spec() llm.Tool {
	return llm.Tool{Name: "noop", Description: "does nothing", InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
}

func (noop) Run(context.Context, *tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Result{Text: "ok"}, nil
}

// BenchmarkLoopStep measures the loop's own cost per step: everything but
// waiting for the model and running the tool. Each step streams a tool call
// from the scripted model over HTTP and records three durable events
// (synchronous=FULL SQLite), as a job does.
//
//	go test -run x -bench LoopStep -benchtime 2000x ./internal/agent
func BenchmarkLoopStep(b *testing.B) {
	fake := llmtest.New(b, llmtest.Script{Steps: []llmtest.Step{
		{Branches: []llmtest.Turn{llmtest.Call("noop", map[string]any{})}, Repeat: true},
	}})
	lm, err := anthropic.New(anthropic.Config{Name: "claude-sonnet-4-5", APIKey: "k", BaseURL: fake.AnthropicURL()})
	if err != nil {
		b.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	if _, _, err := st.CreateJob(context.Background(), store.Job{ID: "job_bench", Task: "x", Status: store.StatusRunning, CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	emit := func(p event.Payload) {
		typ, raw, _ := event.Marshal(p)
		if _, err := st.AppendEvent(context.Background(), "job_bench", typ, raw); err != nil {
			b.Fatal(err)
		}
	}
	var total, model, tool time.Duration
	var l *Loop
	b.ResetTimer()
	for i := range b.N {
		if i%50 == 0 { // keep the conversation (and so the model's share) from growing without bound
			l = &Loop{Model: lm, Tools: []tools.Tool{noop{}}, Env: &tools.Env{}, Emit: emit}
			l.Say("go")
		}
		m0, t0, begin := l.ModelTime, l.ToolTime, time.Now()
		if _, err := l.Step(context.Background()); err != nil {
			b.Fatal(err)
		}
		total += time.Since(begin)
		model += l.ModelTime - m0
		tool += l.ToolTime - t0
	}
	b.ReportMetric(float64((total-model-tool).Microseconds())/float64(b.N)/1000, "overhead-ms/step")
	b.ReportMetric(float64(model.Microseconds())/float64(b.N)/1000, "model-ms/step")
}

package wiring

import (
	"errors"
	"fmt"
	"sync"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/models"
)

// NewJobAgent returns what works on jobs: the model-driven agent, or, with
// AGENTBOX_AGENT=shell, the task run as a bash script.
func NewJobAgent(cfg config.Config) jobs.Agent {
	if cfg.Agent.Kind == "shell" {
		return jobs.ShellAgent{}
	}
	ac := cfg.Agent
	return agent.New(agent.Config{
		Resolve:  ModelResolver(cfg.Model),
		MaxSteps: ac.MaxSteps, MaxTokens: ac.MaxTokens, MaxCostUSD: ac.MaxCostUSD,
		ContextWindow: ac.ContextWindow,
		Tools:         Tools(cfg.Sandbox),
	})
}

// Tools are the agent's tools, the desktop's sized to the sandboxes' display.
func Tools(sb config.Sandbox) []tools.Tool {
	return tools.DefaultFor(tools.Options{DisplayWidth: sb.DisplayWidth, DisplayHeight: sb.DisplayHeight})
}

// ModelResolver opens each model spec once ("" is the configured default)
// and reuses its client for every job.
func ModelResolver(mc config.Model) func(spec string) (llm.Model, error) {
	var mu sync.Mutex
	cache := map[string]llm.Model{}
	return func(spec string) (llm.Model, error) {
		mu.Lock()
		defer mu.Unlock()
		if m, ok := cache[spec]; ok {
			return m, nil
		}
		m, err := models.Open(spec, mc)
		if err != nil {
			return nil, err
		}
		cache[spec] = m
		return m, nil
	}
}

// ModelCheck is how a server that runs agent jobs refuses one at submit
// whose model it cannot open (jobs.ServiceConfig.CheckModel): with
// jobs.ErrNoModel and what the operator sets on the server, rather than
// a job that ends in error once it has waited for a sandbox. Opening a
// model makes its client only; nothing is sent to the provider.
func ModelCheck(mc config.Model) func(spec string) error {
	resolve := ModelResolver(mc)
	return func(spec string) error {
		_, err := resolve(spec)
		if !errors.Is(err, llm.ErrNotConfigured) {
			return nil // opened, or a failure the job reports as its own
		}
		why := err.Error()
		if !mc.Configured() {
			why = "none of ANTHROPIC_API_KEY, OPENAI_API_KEY and OPENAI_BASE_URL is set on the server"
		}
		return fmt.Errorf("%w (%s). The operator must set the model where `agentbox serve` runs, then restart it: "+
			"export ANTHROPIC_API_KEY=… or OPENAI_API_KEY=…, or OPENAI_BASE_URL=http://localhost:11434/v1 with AGENTBOX_MODEL=openai:NAME "+
			"for Ollama or another OpenAI-compatible server (README \"Choosing a model\"). "+
			"A server started with AGENTBOX_AGENT=shell (serve --agent shell) runs tasks as shell scripts without a model", jobs.ErrNoModel, why)
	}
}

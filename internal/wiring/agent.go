package wiring

import (
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

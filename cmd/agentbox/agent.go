package main

import (
	"sync"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/models"
)

// newJobAgent returns what works on jobs: the model-driven agent, or, with
// AGENTBOX_AGENT=shell, the task run as a bash script.
func (a *app) newJobAgent() jobs.Agent {
	if a.cfg.Agent.Kind == "shell" {
		return jobs.ShellAgent{}
	}
	return agent.New(agent.Config{
		Resolve:  a.modelResolver(),
		MaxSteps: a.cfg.Agent.MaxSteps, MaxTokens: a.cfg.Agent.MaxTokens, MaxCostUSD: a.cfg.Agent.MaxCostUSD,
		ContextWindow: a.cfg.Agent.ContextWindow,
		Tools:         a.tools(),
	})
}

// tools are the agent's tools, the desktop's sized to the sandboxes' display.
func (a *app) tools() []tools.Tool {
	sb := a.cfg.Sandbox
	return tools.DefaultFor(tools.Options{DisplayWidth: sb.DisplayWidth, DisplayHeight: sb.DisplayHeight})
}

// modelResolver opens each model spec once ("" is the configured default)
// and reuses its client for every job.
func (a *app) modelResolver() func(spec string) (llm.Model, error) {
	var mu sync.Mutex
	cache := map[string]llm.Model{}
	return func(spec string) (llm.Model, error) {
		mu.Lock()
		defer mu.Unlock()
		if m, ok := cache[spec]; ok {
			return m, nil
		}
		m, err := models.Open(spec, a.cfg.Model)
		if err != nil {
			return nil, err
		}
		cache[spec] = m
		return m, nil
	}
}

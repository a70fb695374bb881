package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/models"
)

// ModelTimeout bounds the model check's one request.
const ModelTimeout = 10 * time.Second

const modelFix = "export ANTHROPIC_API_KEY=...   (or OPENAI_API_KEY=..., or OPENAI_BASE_URL=http://localhost:11434/v1 AGENTBOX_MODEL=openai:NAME for Ollama), then restart agentbox serve"

// modelCheck sends the configured model one request of one output token
// (models.Ping) and says whether it answered: "not configured", "works
// (model X, N ms)" or "fails (model X): why". A model that fails fails the doctor
// when the agent needs it; not configured only warns (sandboxes work).
func (d doctor) modelCheck(ctx context.Context) Check {
	shell := d.cfg.Agent.Kind == "shell"
	if !d.cfg.Model.Configured() {
		if shell {
			return Check{"model", OK, "not configured, not needed: AGENTBOX_AGENT=shell runs tasks as scripts", ""}
		}
		return Check{"model", Warn, "not configured: sandboxes work, agent jobs are refused (400 no_model)", modelFix}
	}
	ctx, cancel := context.WithTimeout(ctx, ModelTimeout)
	defer cancel()
	info, took, err := models.Ping(ctx, "", d.cfg.Model)
	status := Fail
	if shell {
		status = Warn
	}
	switch {
	case errors.Is(err, llm.ErrNotConfigured):
		return Check{"model", status, "not configured: " + err.Error(), modelFix}
	case err != nil:
		return Check{"model", status, fmt.Sprintf("fails (model %s:%s): %s", info.Provider, info.Name, models.PlainReason(err)), modelFailFix(err)}
	}
	return Check{"model", OK, fmt.Sprintf("works (model %s:%s, %d ms)", info.Provider, info.Name, took.Milliseconds()), ""}
}

// modelFailFix says what to look at for a model request that failed.
func modelFailFix(err error) string {
	switch {
	case errors.Is(err, llm.ErrAuth):
		return "check ANTHROPIC_API_KEY or OPENAI_API_KEY"
	case errors.Is(err, llm.ErrUnknownModel):
		return "set AGENTBOX_MODEL=provider:NAME to a model the provider serves"
	}
	return "check that the model server runs and ANTHROPIC_BASE_URL or OPENAI_BASE_URL point at it"
}

package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
)

// Config configures the job agent.
type Config struct {
	// Resolve returns the model for a job's model spec; "" means the
	// server's default. Its error (e.g. no model configured) ends the job.
	Resolve func(spec string) (llm.Model, error)
	// Tools default to tools.Default().
	Tools []tools.Tool
	// MaxSteps applies to jobs that set none (default AGENTBOX_MAX_STEPS's).
	MaxSteps int
	// MaxTokens and MaxCostUSD are per-job budgets; 0 means none.
	MaxTokens  int64
	MaxCostUSD float64
	// ToolTimeout is the default timeout of a command (default 2m).
	ToolTimeout time.Duration
	// ContextWindow overrides the model's context window (0: the model's).
	// A job's limits.context_window overrides both.
	ContextWindow int
}

// SpillDir is where, in the workspace, outputs too large to show are saved.
const SpillDir = ".agentbox/outputs"

// maxIdleAnswers is how many answers in a row without a tool call end a job:
// the model has stopped working but not called finish.
const maxIdleAnswers = 3

// Agent does jobs with a language model; it implements jobs.Agent.
type Agent struct{ cfg Config }

var _ jobs.Agent = (*Agent)(nil)

// New returns an agent.
func New(cfg Config) *Agent {
	if cfg.Tools == nil {
		cfg.Tools = tools.Default()
	}
	cfg.MaxSteps = cmp.Or(max(cfg.MaxSteps, 0), config.Default().Agent.MaxSteps) // AGENTBOX_MAX_STEPS
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = 2 * time.Minute
	}
	return &Agent{cfg: cfg}
}

var _ jobs.DesktopAgent = (*Agent)(nil)

// UsesDesktop reports whether the agent has a tool that needs the sandbox
// image's desktop layer (computer, python): its jobs' sandboxes wait for
// that layer while it builds.
func (a *Agent) UsesDesktop() bool {
	for _, t := range a.cfg.Tools {
		if n := t.Spec().Name; n == tools.NameComputer || n == tools.NamePython {
			return true
		}
	}
	return false
}

// Run works on the job until the model calls finish or a limit stops it.
// A job continued by a follow-up message runs its next turn with the whole
// conversation; its max_steps applies to each turn.
func (a *Agent) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	model, err := a.cfg.Resolve(r.Job.Model)
	if err != nil {
		return jobs.Outcome{Status: store.StatusError, Error: err.Error()}, nil
	}
	l := &Loop{
		Model: model, Tools: a.cfg.Tools, System: SystemPrompt(r.EgressPolicy()),
		Env:    &tools.Env{Guest: r.Sandbox.Guest(), Timeout: a.cfg.ToolTimeout, SpillDir: SpillDir, Network: r.EgressDenials()},
		Emit:   func(p event.Payload) { r.Emit(context.WithoutCancel(ctx), p) },
		Output: func(call string) (func(string, []byte), func()) { return r.Output(ctx, call) },
		Media:  r,
	}
	if err := a.withMemory(l, r.Job); err != nil {
		return jobs.Outcome{Status: store.StatusError, Error: err.Error()}, nil
	}
	history, err := r.History(ctx)
	if err != nil {
		return jobs.Outcome{}, err
	}
	l.Messages, l.Steps = Rebuild(r.Job.Task, history)
	if n := len(history); n > 0 {
		l.Seen = history[n-1].Seq // the messages logged so far are in the conversation
	}
	restoreMemory(l, history)
	lim := stepLimits{max: r.Job.Limits.MaxSteps, turn: StepsBefore(history),
		// The job's record counts earlier attempts' steps (maybe one fewer than
		// the log, if a restart cut the last report): this attempt adds the rest.
		start: min(r.Job.Steps, l.Steps)}
	if lim.max <= 0 {
		lim.max = a.cfg.MaxSteps
	}
	if n := len(l.Messages); n > 0 && l.Messages[n-1].Role == llm.RoleAssistant {
		l.Say(nudge) // cut after a plain answer: the model's turn again
	}
	switch {
	case r.Restored != nil && l.Steps > r.Restored.Step:
		note := restoredText(r.Restored.Step, l.Steps)
		l.Emit(event.Notice{Step: l.Steps, Text: note})
		l.Messages = tell(l.Messages, "[agentbox] "+note)
	case l.Steps > lim.turn:
		note := resumeText(l.Steps, r.Recovered)
		l.Emit(event.Notice{Step: l.Steps, Text: note})
		if !r.Recovered {
			l.Messages = tell(l.Messages, "[agentbox] The job was "+note+": files are kept, but processes started earlier (servers) are gone.")
		}
	}
	return a.drive(ctx, r, l, lim)
}

// restoredText tells the model its job moved to another worker whose
// workspace is the checkpoint of step n while the log is at step m > n.
func restoredText(n, m int) string {
	kept := fmt.Sprintf("as they were after step %d (the last checkpoint)", n)
	if n == 0 {
		kept = "as they were before step 1 (the last checkpoint)"
	}
	lost := fmt.Sprintf("what step %d changed in files is lost", m)
	if m > n+1 {
		lost = fmt.Sprintf("what steps %d to %d changed in files is lost", n+1, m)
	}
	return fmt.Sprintf("The job moved to another worker after its worker was lost, at step %d: the files in /workspace are %s; "+
		"%s; processes started earlier (servers) are gone. Check the files before going on.", m, kept, lost)
}

// stepLimits bound a run's steps.
type stepLimits struct {
	max   int // the most steps of one turn
	turn  int // the steps of the job's earlier turns
	start int // the step the attempt began after: its outcome counts only its own
}

// run is what drive needs of a job's run (*jobs.Run).
type run interface {
	Report(ctx context.Context, p jobs.Progress) error
	Messages(ctx context.Context, after int64) ([]event.Message, int64, error)
}

// drive runs steps until the job ends. Before each step, and when the
// model calls finish, it gives the model the user's messages that came
// since it last looked (listen); a message at finish keeps the job going.
func (a *Agent) drive(ctx context.Context, r run, l *Loop, lim stepLimits) (jobs.Outcome, error) {
	price := l.Model.Info().Price
	outcome := func(status store.Status, errMsg, result string) jobs.Outcome {
		return jobs.Outcome{Status: status, Error: errMsg, Result: result, Steps: l.Steps - lim.start,
			Usage: storeUsage(l.Usage, price), Seen: l.Seen}
	}
	idle := 0
	for {
		if why := a.overBudget(l, price, lim); why != "" {
			return outcome(store.StatusError, why, ""), nil
		}
		if listen(ctx, r, l) {
			idle = 0
		}
		res, err := l.Step(ctx)
		_ = r.Report(context.WithoutCancel(ctx), jobs.Progress{Steps: l.Steps - lim.start, Usage: storeUsage(l.Usage, price), ContextTokens: l.LastInput})
		switch {
		case err != nil && ctx.Err() == nil && IsModelError(err):
			return outcome(store.StatusError, err.Error(), ""), nil
		case err != nil:
			return outcome(store.StatusError, err.Error(), ""), err
		case res.Finish != nil && listen(ctx, r, l):
			idle = 0
			l.Emit(event.Notice{Step: l.Steps, Text: "the user sent a message before the job ended: the agent goes on to answer it"})
			continue
		case res.Finish != nil:
			return outcome(store.StatusComplete, "", res.Finish.Summary), nil
		case res.ToolCalls > 0:
			idle = 0
			continue
		}
		if idle++; idle >= maxIdleAnswers {
			return outcome(store.StatusError, fmt.Sprintf("the model answered %d times in a row without using a tool or calling finish", idle), ""), nil
		}
		l.Say(nudge)
		l.Emit(event.Notice{Step: l.Steps, Text: nudge, Said: true})
	}
}

// listen adds the user's messages logged since the loop last looked to the
// conversation, after the last step's tool results, and reports whether
// there were any. A log that cannot be read is read again next time.
func listen(ctx context.Context, r run, l *Loop) bool {
	msgs, seen, _ := r.Messages(ctx, l.Seen)
	l.Seen = seen
	for _, m := range msgs {
		l.Messages = tell(l.Messages, m.Text)
	}
	return len(msgs) > 0
}

// overBudget says why the job must stop before another step, if it must.
func (a *Agent) overBudget(l *Loop, price llm.Price, lim stepLimits) string {
	switch {
	case l.Steps-lim.turn >= lim.max:
		return fmt.Sprintf("stopped after %d steps without calling finish (max_steps is %d)", l.Steps-lim.turn, lim.max)
	case a.cfg.MaxTokens > 0 && totalTokens(l.Usage) >= a.cfg.MaxTokens:
		return fmt.Sprintf("stopped: the token budget of %d is used up", a.cfg.MaxTokens)
	case a.cfg.MaxCostUSD > 0 && price.Cost(l.Usage) >= a.cfg.MaxCostUSD:
		return fmt.Sprintf("stopped: the cost budget of $%.2f is used up", a.cfg.MaxCostUSD)
	}
	return ""
}

// withMemory fits the loop's prompts into the job's context window and
// gives it the recall tool.
func (a *Agent) withMemory(l *Loop, j store.Job) error {
	window := a.cfg.ContextWindow
	if j.Limits.ContextWindow > 0 {
		window = j.Limits.ContextWindow
	}
	return EnableMemory(l, window)
}

// EnableMemory makes the loop keep every prompt within window tokens (0:
// the model's window), recall-able through the recall tool it adds.
func EnableMemory(l *Loop, window int) error {
	if window <= 0 {
		window = l.Model.Info().ContextWindow
	}
	l.Recall = &memory.Index{}
	l.Tools = append(append([]tools.Tool(nil), l.Tools...), recallTool{l.Recall})
	m, cfg, err := newMemory(l, window)
	for _, name := range optionalTools {
		if err == nil {
			break
		}
		l.Tools = slices.DeleteFunc(l.Tools, func(t tools.Tool) bool { return t.Spec().Name == name })
		m, cfg, err = newMemory(l, window)
	}
	if err != nil {
		return fmt.Errorf("context window of %d tokens: %w", window, err)
	}
	l.Memory, l.MaxOutput = m, cfg.ReserveOutput
	return nil
}

// optionalTools are left out, in this order, of a loop whose context window
// cannot hold every tool's description with room to work: the desktop and
// the notebook tools have the longest descriptions and a model with a small
// window is the least likely to use them well.
var optionalTools = []string{tools.NameComputer, tools.NamePython}

// newMemory sizes a context manager for l's system prompt and tools.
func newMemory(l *Loop, window int) (*memory.Manager, memory.Config, error) {
	est := memory.NewEstimator(0)
	cfg := memory.Config{Window: window, Overhead: est.Request(llm.Request{System: l.System, Tools: tools.Specs(l.Tools)})}.WithDefaults()
	m, err := memory.NewManager(cfg, est)
	return m, cfg, err
}

// tell adds text to the conversation as the user, after the last user
// message's tool results if it ends with one (roles must alternate).
func tell(msgs []llm.Message, text string) []llm.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleUser {
		last := msgs[n-1]
		last.Content = append(append([]llm.Block(nil), last.Content...), llm.Block{Type: llm.BlockText, Text: text})
		return append(msgs[:n-1:n-1], last)
	}
	return append(msgs, llm.Text(llm.RoleUser, text))
}

func resumeText(step int, sameSandbox bool) string {
	where := "in a new sandbox on the saved workspace"
	if sameSandbox {
		where = "in the same sandbox"
	}
	return fmt.Sprintf("resumed after a restart at step %d, %s", step, where)
}

// totalTokens counts every token a job consumed, cached ones included
// (InputTokens excludes cache reads and writes).
func totalTokens(u llm.Usage) int64 {
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens + u.OutputTokens
}

func storeUsage(u llm.Usage, p llm.Price) store.Usage {
	return store.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostUSD: p.Cost(u)}
}

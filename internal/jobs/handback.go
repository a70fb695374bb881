package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/store"
)

// PullRequests opens a pull request of a pushed branch, or returns the
// open one for the same branches (forge.Client).
type PullRequests interface {
	Open(ctx context.Context, remoteURL string, pr forge.PullRequest) (forge.Opened, error)
}

// Bounds of what a hand-back writes from a job's summary.
const (
	maxSubject     = 72
	maxMessageBody = 16 << 10
	maxTitle       = 256
	maxPRBody      = 60 << 10
)

// checkHandBack refuses a hand-back a job could not do, and returns the
// repository with Push set when it asks for a pull request (which needs
// the push): a pull request of a local repository (a path, file://), onto
// the branch it starts from, or with a title or body over the services'
// bounds. A remote whose host or path no service serves is found out at
// the pull request, and stated then.
func checkHandBack(r *store.Repo) (*store.Repo, error) {
	if r == nil || r.PullRequest == nil {
		return r, nil
	}
	bad := func(format string, a ...any) (*store.Repo, error) {
		return r, fmt.Errorf("%w: repo.pull_request: "+format, append([]any{ErrBadRepo}, a...)...)
	}
	p, url := r.PullRequest, strings.ToLower(strings.TrimSpace(r.URL))
	switch {
	case strings.HasPrefix(url, "/") || strings.HasPrefix(url, "file:"):
		return bad("needs a repository on a git hosting service (https://host/owner/repo, git@host:owner/repo.git), not a local one")
	case r.Branch != "" && strings.TrimPrefix(r.Ref, "refs/heads/") == r.Branch:
		return bad("repo.branch %q is the branch the job starts from, which the pull request would merge into", r.Branch)
	case utf8.RuneCountInString(p.Title) > maxTitle:
		return bad("title is longer than %d characters", maxTitle)
	case len(p.Body) > maxPRBody:
		return bad("body is longer than %d bytes", maxPRBody)
	}
	out := *r
	out.Push = true
	return &out, nil
}

// handBack hands the result of a completed turn (out) of repository job
// id back: it commits what the workspace holds on the job's branch in the
// host's git dir (message from the turn's summary), then, as the job's
// repo asks, pushes the branch with the host's credentials and opens its
// pull request. Each step is an event and is bounded by Repos.Timeout;
// ctx ending (a cancel, a lost lease, shutdown) stops it. It returns what to
// record on the job with its end, nil for a job without a repository. A
// failure is stated there, never returned: the turn's work is done, and
// its diff stays what it is.
//
// It must run once the turn's sandbox is gone: it reads the workspace.
func (s *Scheduler) handBack(ctx context.Context, id string, out Outcome) *store.Git {
	r := s.cfg.Repos
	j, err := s.store.GetJob(context.WithoutCancel(ctx), id)
	if r == nil || err != nil || j.Repo == nil || j.Git.BaseCommit == "" {
		if err != nil {
			s.log.Error("hand back: read the job", "job_id", id, "err", err)
		}
		return nil
	}
	got := j.Git
	got.Branch, got.Error = cmp.Or(j.Git.Branch, j.Repo.Branch, DefaultBranch(j.ID)), ""
	hb := &handBack{s: s, r: r, j: j, ctx: ctx, got: got}
	if out.left != nil {
		hb.fail(event.Git{Action: "commit", Branch: got.Branch},
			fmt.Errorf("the turn's sandbox could not be removed, so its workspace is not read: %w", out.left))
	} else {
		hb.run(out.Result)
	}
	return &hb.got
}

// handBack is one hand-back under way.
type handBack struct {
	s   *Scheduler
	r   *Repos
	j   store.Job
	ctx context.Context
	// got is the job's git record as the hand-back goes.
	got store.Git
}

func (h *handBack) run(summary string) {
	if !h.commit(commitMessage(h.j, summary)) || !(h.j.Repo.Push || h.j.Repo.PullRequest != nil) {
		return
	}
	if h.got.Commit == h.j.Git.BaseCommit {
		h.fail(event.Git{Action: "push", Branch: h.got.Branch, URL: githost.Redact(h.j.Repo.URL)},
			errors.New("the job changed nothing in the repository: no commit to push"))
		return
	}
	if h.push() && h.j.Repo.PullRequest != nil {
		h.pullRequest(summary)
	}
}

// step runs f under the step bound, and says why it failed when ctx
// ended: f's error is then git's "killed" or a canceled request.
func (h *handBack) step(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(h.ctx, h.r.timeout())
	defer cancel()
	err := f(ctx)
	if err != nil && h.ctx.Err() != nil {
		err = fmt.Errorf("interrupted (%v): %w", context.Cause(h.ctx), err)
	}
	return err
}

// fail records a step's failure on the job and in its event.
func (h *handBack) fail(ev event.Git, err error) {
	h.got.Error = fmt.Sprintf("%s: %v", ev.Action, err)
	ev.Error = err.Error()
	h.emit(ev)
	h.s.log.Warn("hand back: the job stays complete", "job_id", h.j.ID, "step", ev.Action, "err", err)
}

// emit logs ev, even once ctx ended: a step that was stopped says so.
func (h *handBack) emit(ev event.Git) {
	h.s.emit(context.WithoutCancel(h.ctx), h.j.ID, ev)
}

func (h *handBack) commit(message string) bool {
	ev := event.Git{Action: "commit", Branch: h.got.Branch}
	var commit string
	err := h.step(func(ctx context.Context) error {
		ws, err := h.s.cfg.Workspaces.Prepare(ctx, h.j.ID)
		if err == nil {
			commit, _, err = h.r.Host.Commit(ctx, h.r.GitDir(h.j.ID), ws, h.got.Branch, message)
		}
		return err
	})
	if err != nil {
		h.fail(ev, err)
		return false
	}
	if commit != h.got.Commit {
		h.got.Commit, h.got.Pushed = commit, false
	}
	ev.Commit = commit
	h.emit(ev)
	return true
}

func (h *handBack) push() bool {
	ev := event.Git{Action: "push", URL: githost.Redact(h.j.Repo.URL), Branch: h.got.Branch, Commit: h.got.Commit}
	err := h.step(func(ctx context.Context) error {
		return h.r.Host.Push(ctx, h.r.GitDir(h.j.ID), h.j.Repo.URL, h.got.Branch)
	})
	if err != nil {
		h.fail(ev, err)
		return false
	}
	h.got.Pushed = true
	h.emit(ev)
	return true
}

// pullRequest opens the job's pull request from its branch into the
// branch it started from (its ref when that is a branch, else the
// remote's default branch), or finds the one a previous turn opened.
func (h *handBack) pullRequest(summary string) {
	ev := event.Git{Action: "pull_request", Branch: h.got.Branch, Commit: h.got.Commit}
	var opened forge.Opened
	err := h.step(func(ctx context.Context) error {
		if h.r.Forge == nil {
			return errors.New("no pull request service is configured on this worker")
		}
		base, err := h.r.Host.BaseBranch(ctx, h.r.GitDir(h.j.ID), h.j.Repo.Ref)
		if err != nil {
			return err
		}
		opened, err = h.r.Forge.Open(ctx, h.j.Repo.URL, pullRequestOf(h.j, h.got.Branch, base, summary))
		return err
	})
	if err != nil {
		h.fail(ev, err)
		return
	}
	h.got.PullRequestURL, ev.URL = opened.URL, opened.URL
	h.emit(ev)
}

// pullRequestOf is the pull request the job asks for: its title the
// summary's first line unless the job gives one, its body the summary
// unless the job gives one.
func pullRequestOf(j store.Job, head, base, summary string) forge.PullRequest {
	p := j.Repo.PullRequest
	subject, rest := splitSummary(j, summary)
	body := p.Body
	if body == "" {
		body = clip(strings.TrimSpace(subject+"\n\n"+rest), maxPRBody) + "\n\n---\nOpened by agentbox for job " + j.ID + "."
	}
	title := clip(strings.TrimSpace(cleanText(p.Title)), maxTitle)
	return forge.PullRequest{Head: head, Base: base, Title: cmp.Or(title, subject), Body: body, Draft: p.Draft}
}

// commitMessage is the message of a turn's commit: the summary's first
// line as the subject, the rest as the body, and trailers naming the job
// (and the turn, after the first).
func commitMessage(j store.Job, summary string) string {
	subject, rest := splitSummary(j, summary)
	msg := subject + "\n\n"
	if rest != "" {
		msg += clip(rest, maxMessageBody) + "\n\n"
	}
	msg += "Agentbox-Job: " + j.ID + "\n"
	if j.Turn > 1 {
		msg += fmt.Sprintf("Agentbox-Turn: %d\n", j.Turn)
	}
	return msg
}

// splitSummary splits a turn's summary into a subject line of at most
// maxSubject runes and the rest; an empty summary gives the task's first
// line as the subject.
func splitSummary(j store.Job, summary string) (subject, rest string) {
	text := strings.TrimSpace(cleanText(summary))
	if text == "" {
		text = strings.TrimSpace(cleanText(j.Task))
	}
	first, rest, _ := strings.Cut(text, "\n")
	return subjectLine(first, "agentbox job "+j.ID), strings.TrimSpace(rest)
}

// subjectLine is line cut to a commit subject's length, or def if empty.
func subjectLine(line, def string) string {
	line = strings.TrimSpace(line)
	if r := []rune(line); len(r) > maxSubject {
		line = strings.TrimSpace(string(r[:maxSubject-3])) + "..."
	}
	return cmp.Or(line, def)
}

// cleanText drops control characters but newlines and tabs (carriage
// returns too): a summary comes from the model, and a NUL cuts a commit
// message short.
func cleanText(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[…]"
}

// applyGit sets on g what a hand-back got: the branch, its commit,
// whether that is pushed, the pull request, and this turn's error (none
// clears an earlier turn's). The base stays g's.
func applyGit(g *store.Git, got *store.Git) {
	if got != nil {
		base := g.BaseCommit
		*g = *got
		g.BaseCommit = base
	}
}

// timeout bounds one step of a hand-back.
func (r *Repos) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return config.Default().Git.Timeout
}

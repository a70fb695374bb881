package wiring

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/wire"
)

// SubmitFlags are `agentbox submit`'s options as a person types them,
// but for the connection and the output: sizes such as 4g, KEY=VALUE
// pairs. Empty means the server's default.
type SubmitFlags struct {
	Model, Memory, Disk, CPUs, Key string
	Timeout                        time.Duration
	MaxSteps                       int
	Meta                           []string
	Image, Isolation               string
	Repo, Ref                      string
	HandBack                       HandBackFlags
	Workspace, WorkspaceFrom       string
	Exclude                        []string
	Network                        NetworkFlags
}

// Request builds the API request for task (read from stdin when "-"),
// checking each flag so that a mistake names the flag rather than a JSON
// field.
func (f SubmitFlags) Request(stdin io.Reader, task string) (wire.SubmitRequest, error) {
	task, err := TextArg(stdin, task, "task")
	if err != nil {
		return wire.SubmitRequest{}, err
	}
	req := wire.SubmitRequest{Task: task, Model: f.Model, WorkspaceFrom: f.WorkspaceFrom}
	req.Image, req.Isolation = f.Image, f.Isolation
	l, lerrs := f.limits()
	errs := append([]error{f.checkStart()}, lerrs...)
	if l != (wire.Limits{}) {
		req.Limits = &l
	}
	meta, err := parseMeta(f.Meta)
	req.Metadata = meta
	errs = append(errs, err)
	req.Repo = f.repoRequest()
	if f.Ref != "" && f.Repo == "" {
		errs = append(errs, errors.New("--ref needs --repo"))
	}
	f.HandBack.toWire(req.Repo)
	errs = append(errs, f.HandBack.Check(f.Repo))
	if !f.Network.IsZero() {
		p, err := f.Network.Parse()
		req.Network = &p
		errs = append(errs, err)
	}
	return req, errors.Join(errs...)
}

// limits are the job's limits the flags set, and what is wrong with them.
func (f SubmitFlags) limits() (wire.Limits, []error) {
	var l wire.Limits
	var errs []error
	l.Timeout = wire.Duration(f.Timeout)
	if f.Memory != "" {
		n, err := units.ParseSize(f.Memory)
		errs = append(errs, flagErr("--memory", err))
		l.Memory = wire.ByteSize(n)
	}
	if f.Disk != "" {
		n, err := units.ParseSize(f.Disk)
		errs = append(errs, flagErr("--disk", err))
		l.Disk = wire.ByteSize(n)
	}
	if f.CPUs != "" {
		l.CPUs, _ = strconv.ParseFloat(f.CPUs, 64) // checked as the flag was parsed
	}
	if f.MaxSteps < 0 {
		errs = append(errs, errors.New("--max-steps must not be negative"))
	}
	l.MaxSteps = f.MaxSteps
	return l, errs
}

// checkStart refuses flags naming two starting points.
func (f SubmitFlags) checkStart() error {
	switch {
	case f.Workspace != "" && f.WorkspaceFrom != "":
		return errors.New("--workspace and --workspace-from: a job starts from one of them")
	case f.Workspace == "" && len(f.Exclude) > 0:
		return errors.New("--exclude goes with --workspace")
	}
	return nil
}

// repoRequest is the job's repository, as --repo and --ref name it.
func (f SubmitFlags) repoRequest() *wire.Repo {
	if f.Repo == "" {
		return nil
	}
	return &wire.Repo{URL: f.Repo, Ref: f.Ref}
}

func flagErr(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", flag, err)
}

func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--meta %q: want KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

// TextArg is a command's text argument (a task, a message), read from
// stdin, up to 1 MiB, when it is "-".
func TextArg(stdin io.Reader, arg, what string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read %s from stdin: %w", what, err)
	}
	return string(b), nil
}

// HandBackFlags are how submit and run ask for a repository job's result
// back: the branch it is committed on, the push, the pull request.
type HandBackFlags struct {
	Branch, Title, Body string
	Push, PR, Draft     bool
}

// Check says which flag needs --repo, when repo is empty.
func (f HandBackFlags) Check(repo string) error {
	if repo != "" {
		return nil
	}
	for _, c := range []struct {
		name string
		set  bool
	}{{"--branch", f.Branch != ""}, {"--push", f.Push}, {"--pr", f.PR}, {"--pr-title", f.Title != ""}, {"--pr-body", f.Body != ""}, {"--draft", f.Draft}} {
		if c.set {
			return fmt.Errorf("%s needs --repo", c.name)
		}
	}
	return nil
}

// pullRequest is the pull request the flags ask for; nil for none.
func (f HandBackFlags) pullRequest() *store.PullRequest {
	if !f.PR && f.Title == "" && f.Body == "" && !f.Draft {
		return nil
	}
	return &store.PullRequest{Title: f.Title, Body: f.Body, Draft: f.Draft}
}

// toWire sets on r (nil without --repo) what the flags ask for.
func (f HandBackFlags) toWire(r *wire.Repo) {
	if r == nil {
		return
	}
	r.Branch, r.Push = f.Branch, f.Push
	if pr := f.pullRequest(); pr != nil {
		r.PullRequest = &wire.PullRequest{Title: pr.Title, Body: pr.Body, Draft: pr.Draft}
	}
}

// ToRun sets on r what the flags ask for.
func (f HandBackFlags) ToRun(r *RunRequest) {
	r.Branch, r.Push, r.PullRequest = f.Branch, f.Push, f.pullRequest()
}

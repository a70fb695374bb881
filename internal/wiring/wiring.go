// Package wiring assembles agentbox from its configuration: the job store,
// the sandbox driver, the workspace store, the scheduler and the job
// service, once for every way agentbox runs them — the server
// (OpenServer), one job in the foreground (RunJob), a sandbox for one
// command (NewScratch) and the benchmarks (OpenBenchAPI, NewDriver).
// Whatever an assembly opens, its one Close closes, last opened first.
//
// cmd/agentbox parses flags into a config.Config, calls this package, and
// prints what it returns; nothing here reads flags or the environment.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// closers is what an assembly opened, closed last first by Close.
type closers []func() error

// add makes f the next thing Close closes.
func (c *closers) add(f func() error) { *c = append(*c, f) }

// addFunc adds a closer that cannot fail.
func (c *closers) addFunc(f func()) { c.add(func() error { f(); return nil }) }

// Close closes everything added, last added first, and returns their
// errors joined. A second Close does nothing.
func (c *closers) Close() error {
	var errs []error
	for i := len(*c) - 1; i >= 0; i-- {
		errs = append(errs, (*c)[i]())
	}
	*c = nil
	return errors.Join(errs...)
}

// jobSide is the job side of agentbox over one directory: the store
// (agentbox.db) and the workspaces in it, the service over them, and, for a
// worker, a sandbox driver and the scheduler.
type jobSide struct {
	store      store.Store
	workspaces *workspace.Local
	repos      *jobs.Repos
	media      *jobs.Media
	scheduler  *jobs.Scheduler // nil without workers
	service    *jobs.Service
	// checkIsolation says why a tier cannot run on this node's driver;
	// nil without one.
	checkIsolation func(ctx context.Context, iso string) error
	closers
}

// jobsConfig says what openJobs assembles.
type jobsConfig struct {
	dir string
	// store is Config.Store: empty for agentbox.db in dir (a run's and a
	// benchmark's private store), else as openStore reads it.
	store string
	// workers adds a driver and a scheduler configured by sched (its
	// Workspaces is filled in); without, the service is the API's only.
	workers bool
	// noDriver makes the scheduler without a sandbox driver: an API
	// replica's, which runs no jobs.
	noDriver bool
	sched    jobs.SchedulerConfig
	// metrics, if set, receives the scheduler's metrics.
	metrics     prometheus.Registerer
	maxAttempts int
	// ceilings bounds the limits of submitted jobs; nil sets none.
	ceilings *config.Ceilings
	// inPlace, if set, is a person's directory every job works in
	// itself (agentbox run --in-place), mounted as it is.
	inPlace string
	// blobs opens the blob store AGENTBOX_BLOBS names (serve only): with
	// one, the service's workspaces are its checkpoints and the workers
	// checkpoint to it.
	blobs bool
	// server is the address the server listens on (serve only): the
	// egress proxies never connect to it (egress.Options.Never).
	server net.Addr
}

// openJobs assembles the job side jc describes; log receives the driver's
// warnings.
func openJobs(ctx context.Context, cfg config.Config, log *slog.Logger, jc jobsConfig) (*jobSide, error) {
	st, err := openStore(ctx, jc.store, jc.dir, log)
	if err != nil {
		return nil, err
	}
	j := &jobSide{store: st, workspaces: workspace.NewLocal(jc.dir), media: jobs.NewMedia(jc.dir)}
	if jc.inPlace != "" {
		j.workspaces = workspace.NewInPlace(jc.inPlace)
	}
	j.add(st.Close)
	if j.repos, err = newRepos(cfg, jc.dir, log); err != nil {
		j.Close()
		return nil, err
	}
	var ws workspace.Store = j.workspaces
	if jc.blobs {
		shared, b, err := openShared(cfg, st, log, jc.dir)
		if err != nil {
			j.Close()
			return nil, err
		}
		if shared != nil {
			ws, jc.sched.Checkpoints, j.media.Blobs = shared, shared, b
			jc.sched.CheckpointMarks = filepath.Join(jc.dir, "checkpoint-marks")
		}
	}
	if jc.workers {
		if err := j.startWorkers(cfg, log, jc); err != nil {
			j.Close()
			return nil, err
		}
	}
	j.service = jobs.NewService(st, ws, jc.maxAttempts, j.scheduler)
	j.service.SetRepos(j.repos)
	if ws == workspace.Store(j.workspaces) {
		if err := j.service.SetSnapshots(filepath.Join(jc.dir, "snapshots")); err != nil {
			j.Close()
			return nil, err
		}
	}
	j.service.SetMedia(j.media)
	j.service.SetMaxUpload(cfg.Server.MaxUpload)
	if jc.ceilings != nil {
		j.service.SetCeilings(*jc.ceilings)
	}
	j.service.SetImages(cfg.Sandbox.AllowedImages())
	j.service.SetIsolation(cfg.Sandbox.Isolation, j.checkIsolation)
	j.service.SetEgress(cfg.Egress.Policy)
	if jc.workers && !jc.noDriver && cfg.Agent.Kind == "model" {
		j.service.SetModelCheck(ModelCheck(cfg.Model)) // this node runs the jobs: its model is theirs
	}
	if cfg.Agent.Kind == "shell" {
		j.service.RefuseMessages("follow-up messages need the model agent; this server runs the shell agent (AGENTBOX_AGENT=shell), which runs the task as a script")
	}
	return j, nil
}

// openStore opens the job store: the PostgreSQL database at url when it is
// one (config.StoreIsPostgres), else agentbox.db in dir. log, if set, is
// told which, never with the URL's password.
func openStore(ctx context.Context, url, dir string, log *slog.Logger) (store.Store, error) {
	if !config.StoreIsPostgres(url) {
		return sqlite.Open(ctx, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	}
	st, err := postgres.Open(ctx, url, postgres.Options{Log: log})
	if err != nil {
		return nil, err
	}
	if log != nil {
		log.Info("job store: PostgreSQL", "url", st.URL())
	}
	return st, nil
}

// startWorkers opens the driver (unless jc.noDriver) and makes the
// scheduler.
func (j *jobSide) startWorkers(cfg config.Config, log *slog.Logger, jc jobsConfig) error {
	var d Driver
	if !jc.noDriver {
		var err error
		if d, err = NewDriver(cfg, log, jc.sched.Concurrency); err != nil {
			return err
		}
		j.add(d.Close)
		if t, ok := d.(sandbox.IsolationChecker); ok {
			j.checkIsolation = t.Check
		}
	}
	var m *jobs.Metrics
	if jc.metrics != nil {
		m = jobs.NewMetrics(jc.metrics, j.store)
	}
	jc.sched.Workspaces, jc.sched.Repos, jc.sched.Media = j.workspaces, j.repos, j.media
	if !jc.noDriver {
		jc.sched.Egress = newEgress(cfg, jc.metrics, jc.server)
		g, stop, err := newGate(context.Background(), cfg, log, jc.server != nil)
		if err != nil {
			return err
		}
		j.addFunc(stop)
		if g != nil {
			jc.sched.Images = g
		}
	}
	if jc.inPlace != "" {
		d = personalWorkspaces{d}
	}
	j.scheduler = jobs.NewScheduler(jc.sched, j.store, d, NewJobAgent(cfg), m)
	return nil
}

// newRepos is the host's git as cfg.Git says, over the git dirs in dir:
// local remotes in the data dir refused, first-seen SSH host keys kept in
// <data dir>/ssh_known_hosts.
// Without git on the host there are none: jobs then run without a
// snapshot (no diff) and repository jobs end in error saying why, rather
// than every job failing on its snapshot.
func newRepos(cfg config.Config, dir string, log *slog.Logger) (*jobs.Repos, error) {
	if _, err := exec.LookPath("git"); err != nil {
		log.Warn("no git on this host: jobs get no diff, and repository jobs end in error (install git)", "err", err)
		return nil, nil
	}
	g := cfg.Git
	if g.SSHKey != "" {
		if _, err := os.Stat(g.SSHKey); err != nil {
			return nil, fmt.Errorf("AGENTBOX_GIT_SSH_KEY: %w", err)
		}
	}
	h, err := githost.New(githost.Config{Token: g.Token, TokenUser: g.TokenUser, TokenHosts: g.TokenHosts,
		SSHKey: g.SSHKey, SSHKnownHosts: g.SSHKnownHosts, KnownHostsFile: filepath.Join(cfg.DataDir, "ssh_known_hosts"),
		Author: g.Author, AllowLocal: g.AllowLocal, Forbidden: []string{cfg.DataDir}, Timeout: g.Timeout, Memory: g.Memory, BigFile: g.BigFile})
	if err != nil {
		return nil, err
	}
	return &jobs.Repos{Host: h, Dir: filepath.Join(dir, "git"), Forge: forge.New(forgeHosts(g), nil), Timeout: g.Timeout,
		Diffs: g.Diffs, MaxDiff: g.MaxDiff, MinFree: cfg.Sandbox.MinFreeDisk, DiskFree: docker.DiskFree}, nil
}

// forgeHosts are the pull-request services of g (AGENTBOX_GIT_HOSTS, and
// github.com), each with the token if it may go to that host
// (AGENTBOX_GIT_TOKEN_HOSTS).
func forgeHosts(g config.Git) []forge.Host {
	hosts := g.Hosts
	if len(hosts) == 0 {
		hosts, _ = forge.ParseHosts("") // github.com alone
	}
	out := make([]forge.Host, 0, len(hosts))
	for _, h := range hosts {
		if len(g.TokenHosts) == 0 || slices.ContainsFunc(g.TokenHosts, func(t string) bool { return strings.EqualFold(t, h.Host) }) {
			h.Token = g.Token
		}
		out = append(out, h)
	}
	return out
}

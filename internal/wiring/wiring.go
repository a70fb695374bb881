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
	"github.com/agentbox/agentbox/internal/image"
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
// (agentbox.db) and the workspaces in it, the live feed and the service
// over them, and, for a worker, a sandbox driver and the scheduler (for an
// API replica, the reaper of dead workers' jobs).
type jobSide struct {
	store      store.Store
	workspaces *workspace.Local
	repos      *jobs.Repos
	media      *jobs.Media
	feed       *jobs.Feed
	scheduler  *jobs.Scheduler // nil without workers
	reaper     *jobs.Reaper    // an API replica's (jobsConfig.noDriver)
	service    *jobs.Service
	metrics    *jobs.Metrics
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
	// noDriver makes, in place of the scheduler, a reaper of the jobs of
	// dead workers: an API replica's, which runs no jobs.
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
	j := &jobSide{store: st, workspaces: workspace.NewLocal(jc.dir), media: jobs.NewMedia(jc.dir), feed: jobs.NewFeed(st, log)}
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
	sc, err := j.serviceConfig(cfg, jc, ws)
	if err == nil {
		j.service, err = jobs.NewService(sc)
	}
	if err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// serviceConfig is the service of the job side jc describes, over ws.
func (j *jobSide) serviceConfig(cfg config.Config, jc jobsConfig, ws workspace.Store) (jobs.ServiceConfig, error) {
	eg, err := EgressPolicy(cfg)
	if err != nil {
		return jobs.ServiceConfig{}, err
	}
	sc := jobs.ServiceConfig{Store: j.store, Workspaces: ws, Feed: j.feed, Scheduler: j.scheduler,
		MaxAttempts: jc.maxAttempts, Lease: jc.sched.Lease, Images: cfg.Sandbox.AllowedImages(), Repos: j.repos, Media: j.media,
		MaxUpload: cfg.Server.MaxUpload, Isolation: cfg.Sandbox.Isolation, CheckIsolation: j.checkIsolation, Egress: eg}
	if ws == workspace.Store(j.workspaces) {
		sc.Snapshots = filepath.Join(jc.dir, "snapshots")
	}
	if jc.ceilings != nil {
		sc.Ceilings = *jc.ceilings
	}
	if jc.workers && !jc.noDriver && cfg.Agent.Kind == "model" {
		sc.CheckModel = ModelCheck(cfg.Model) // this node runs the jobs: its model is theirs
	}
	if cfg.Agent.Kind == "shell" {
		sc.NoMessages = "follow-up messages need the model agent; this server runs the shell agent (AGENTBOX_AGENT=shell), which runs the task as a script"
	}
	return sc, nil
}

// run runs the job side until ctx ends: its feed, and its scheduler or
// its reaper; then it waits for them (the scheduler's jobs wound down).
func (j *jobSide) run(ctx context.Context) {
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		j.feed.Run(feedCtx)
	}()
	switch {
	case j.scheduler != nil:
		_ = j.scheduler.Run(ctx)
	case j.reaper != nil:
		j.reaper.Run(ctx)
	default:
		<-ctx.Done()
	}
	stopFeed() // the feed wakes the scheduler's jobs' followers until they ended
	<-fed
}

// capacity is how many jobs this job side runs at once.
func (j *jobSide) capacity() int {
	if j.scheduler == nil {
		return 0
	}
	return j.scheduler.Capacity()
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

// startWorkers opens the driver and makes the scheduler; an API replica
// (jc.noDriver) gets a reaper in its place.
func (j *jobSide) startWorkers(cfg config.Config, log *slog.Logger, jc jobsConfig) error {
	if jc.metrics != nil {
		j.metrics = jobs.NewMetrics(jc.metrics, j.store)
	}
	if jc.noDriver {
		j.reaper = jobs.NewReaper(jobs.ReaperConfig{Feed: j.feed, Lease: jc.sched.Lease, Metrics: j.metrics, Log: jc.sched.Log})
		return nil
	}
	d, err := NewDriver(cfg, log, jc.sched.Concurrency)
	if err != nil {
		return err
	}
	j.add(d.Close)
	if t, ok := d.(sandbox.IsolationChecker); ok {
		j.checkIsolation = t.Check
	}
	g, stop, err := newGate(context.Background(), cfg, log, jc.server != nil)
	if err != nil {
		return err
	}
	j.addFunc(stop)
	if jc.inPlace != "" {
		d = personalWorkspaces{d}
	}
	sc, err := j.schedulerConfig(cfg, jc, d, g)
	if err != nil {
		return err
	}
	j.scheduler = jobs.NewScheduler(sc)
	return nil
}

// schedulerConfig is jc.sched completed with what the job side opened: the
// driver d and the image gate g (nil: none).
func (j *jobSide) schedulerConfig(cfg config.Config, jc jobsConfig, d Driver, g *image.Gate) (jobs.SchedulerConfig, error) {
	sc := jc.sched
	sc.Store, sc.Feed, sc.Driver, sc.Agent, sc.Metrics = j.store, j.feed, d, NewJobAgent(cfg), j.metrics
	sc.Workspaces, sc.Repos, sc.Media = j.workspaces, j.repos, j.media
	if g != nil {
		sc.Images = g
	}
	var err error
	sc.Egress, err = newEgress(cfg, jc.metrics, jc.server)
	return sc, err
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
	hosts, err := forgeHosts(g)
	if err != nil {
		return nil, err
	}
	return &jobs.Repos{Host: h, Dir: filepath.Join(dir, "git"), Forge: forge.New(hosts, nil), Timeout: g.Timeout,
		Diffs: g.Diffs, MaxDiff: g.MaxDiff, MinFree: cfg.Sandbox.MinFreeDisk, DiskFree: docker.DiskFree}, nil
}

// forgeHosts are the pull-request services of g (AGENTBOX_GIT_HOSTS, and
// github.com), each with the token if it may go to that host
// (AGENTBOX_GIT_TOKEN_HOSTS).
func forgeHosts(g config.Git) ([]forge.Host, error) {
	hosts, err := forge.ParseHosts(g.Hosts) // github.com alone if none
	if err != nil {
		return nil, err
	}
	out := make([]forge.Host, 0, len(hosts))
	for _, h := range hosts {
		if len(g.TokenHosts) == 0 || slices.ContainsFunc(g.TokenHosts, func(t string) bool { return strings.EqualFold(t, h.Host) }) {
			h.Token = g.Token
		}
		out = append(out, h)
	}
	return out, nil
}

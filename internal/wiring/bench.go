package wiring

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/pgserver"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// BenchAPI is a server over a fresh store in a temporary directory, on a
// loopback port: API-only (no workers) for what `agentbox bench api`
// drives, or with a worker (OpenBenchServer). Close stops it and removes
// the directory.
type BenchAPI struct {
	URL, Token string
	closers
}

// OpenBenchAPI starts a BenchAPI.
func OpenBenchAPI(ctx context.Context, cfg config.Config) (*BenchAPI, error) {
	return openBench(ctx, cfg, false, nil)
}

// OpenBenchServer starts a BenchAPI with a worker that runs each job's
// task as a bash script (the shell agent) in a sandbox of the configured
// driver, everything under the temporary directory: what
// `agentbox bench upload` drives.
func OpenBenchServer(ctx context.Context, cfg config.Config) (*BenchAPI, error) {
	cfg.Agent.Kind = "shell"
	return openBench(ctx, cfg, true, nil)
}

// OpenBenchUI starts an API-only BenchAPI over a store fill has filled
// first: what `agentbox bench ui` drives. fill writes through the real
// SQLite store with synchronous=NORMAL, so that thousands of jobs take
// seconds; the server then opens it as `agentbox serve` does.
func OpenBenchUI(ctx context.Context, cfg config.Config, fill func(context.Context, store.Store) error) (*BenchAPI, error) {
	return openBench(ctx, cfg, false, func(dir string) error {
		st, err := sqlite.Open(ctx, filepath.Join(dir, "agentbox.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
		if err != nil {
			return err
		}
		err = fill(ctx, st)
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// openBench starts a BenchAPI on a new data dir, which prepare (if not
// nil) fills first.
func openBench(ctx context.Context, cfg config.Config, workers bool, prepare func(dir string) error) (*BenchAPI, error) {
	dir, err := os.MkdirTemp("", "agentbox-bench-")
	if err != nil {
		return nil, err
	}
	b := &BenchAPI{Token: "bench-token"}
	b.add(func() error { return os.RemoveAll(dir) })
	cfg.DataDir = dir
	if prepare != nil {
		if err := prepare(dir); err != nil {
			b.Close()
			return nil, err
		}
	}
	if err := b.serve(ctx, cfg, workers); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *BenchAPI) serve(ctx context.Context, cfg config.Config, workers bool) error {
	j, err := openJobs(ctx, cfg, nil, jobsConfig{dir: cfg.DataDir, maxAttempts: 3, workers: workers,
		sched: jobs.SchedulerConfig{WorkerID: "bench", Concurrency: 1, DefaultTimeout: cfg.Server.JobTimeout, Grace: -1}})
	if err != nil {
		return err
	}
	b.add(j.Close)
	if workers {
		b.runJobs(ctx, j)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ac := api.Config{Tokens: []string{b.Token}, MaxUploadBytes: cfg.Server.MaxUpload}
	srv := &http.Server{Handler: api.New(ac, j.service, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	b.add(func() error {
		err := srv.Close()
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			return serr
		}
		return err
	})
	b.URL = "http://" + l.Addr().String()
	return nil
}

// runJobs runs j's scheduler until Close.
func (b *BenchAPI) runJobs(ctx context.Context, j *jobSide) {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.run(ctx)
	}()
	b.addFunc(func() {
		stop()
		<-done
	})
}

// BenchStores are the stores `agentbox bench store` compares: SQLite as
// `agentbox serve` opens it, in a temporary directory, and PostgreSQL at
// pgURL, or, with pgURL empty, on a durable server of Debian's postgresql
// that it starts in a temporary directory (internal/pgserver). Each has
// a submitter's store and a worker's: for PostgreSQL two connection pools
// with a listener each, as two replicas have. Close stops and removes
// everything.
func BenchStores(ctx context.Context, pgURL string) ([]bench.Stores, func(), error) {
	var c closers
	dir, err := os.MkdirTemp("", "agentbox-benchstore-")
	if err != nil {
		return nil, nil, err
	}
	c.add(func() error { return os.RemoveAll(dir) })
	lite, err := sqlite.Open(ctx, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	c.add(lite.Close)
	name := "PostgreSQL at " + postgres.Redact(pgURL)
	if pgURL == "" {
		srv, err := pgserver.Start("", "agentbox-benchpg-", pgserver.Options{Durable: true})
		if err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("start a PostgreSQL server (or pass --postgres URL): %w", err)
		}
		c.addFunc(srv.Stop)
		if pgURL, err = srv.CreateDatabase(ctx, "bench"); err != nil {
			c.Close()
			return nil, nil, err
		}
		name = "PostgreSQL 15, local, durable"
	}
	var pgs [2]*postgres.Store
	for i := range pgs {
		if pgs[i], err = postgres.Open(ctx, pgURL, postgres.Options{}); err != nil {
			c.Close()
			return nil, nil, err
		}
		c.add(pgs[i].Close)
	}
	return []bench.Stores{
		{Name: "SQLite", Submit: lite, Worker: lite},
		{Name: name, Submit: pgs[0], Worker: pgs[1]},
	}, func() { c.Close() }, nil
}

// BenchCluster is a cluster in one process for `agentbox bench drain`:
// a durable PostgreSQL of its own (internal/pgserver), one API replica
// and n workers, each a Server with a data dir of its own, running each
// job's task as a bash script (the shell agent) in sandboxes of the
// local engine. Close stops everything and removes what it made.
type BenchCluster struct {
	URL, Token string
	closers
}

// OpenBenchCluster starts a BenchCluster of n workers running up to
// concurrency jobs each.
func OpenBenchCluster(ctx context.Context, cfg config.Config, n, concurrency int) (*BenchCluster, error) {
	b := &BenchCluster{Token: "bench-token"}
	srv, err := pgserver.Start("", "agentbox-benchpg-", pgserver.Options{Durable: true})
	if err != nil {
		return nil, fmt.Errorf("start a PostgreSQL server: %w", err)
	}
	b.addFunc(srv.Stop)
	url, err := srv.CreateDatabase(ctx, "bench")
	if err != nil {
		b.Close()
		return nil, err
	}
	var secret [24]byte
	_, _ = rand.Read(secret[:])
	cfg.Store, cfg.Agent.Kind, cfg.Server.Token = url, "shell", b.Token
	cfg.Cluster.Secret = hex.EncodeToString(secret[:])
	cfg.Server.Addr = "127.0.0.1:0"
	for i := range n + 1 {
		c := cfg
		c.Role, c.Server.Concurrency = config.RoleWorker, concurrency
		if i == 0 {
			c.Role, c.Server.Concurrency = config.RoleAPI, 0
		}
		c.Sandbox.Instance = fmt.Sprintf("bench-drain-%d", i)
		addr, err := b.serveOne(ctx, c)
		if err != nil {
			b.Close()
			return nil, err
		}
		if i == 0 {
			b.URL = "http://" + addr
		}
	}
	return b, nil
}

// serveOne starts one Server of the cluster in a data dir of its own and
// returns its address.
func (b *BenchCluster) serveOne(ctx context.Context, cfg config.Config) (string, error) {
	dir, err := os.MkdirTemp("", "agentbox-benchdrain-")
	if err != nil {
		return "", err
	}
	b.add(func() error { return os.RemoveAll(dir) })
	cfg.DataDir = dir
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := OpenServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		return "", err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	b.add(func() error {
		cancel()
		err := <-served
		return errors.Join(err, s.Close())
	})
	return s.listener.Addr().String(), nil
}

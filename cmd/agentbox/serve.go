package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the orchestrator: REST API, job store, scheduler and sandbox workers",
		Long: `serve runs the agentbox server: the REST API under /v1 (see docs/api.md), a
durable job store (SQLite in the data dir, or with --store a PostgreSQL
database several servers share; see docs/store.md), and a pool of workers that claim
jobs with a lease, run each in a fresh sandbox, and record every step as an
event.

Auth: every route but /healthz needs a bearer token. Give one in
AGENTBOX_TOKEN or a file in AGENTBOX_TOKEN_FILE; without either, a token is
generated on first start into <data dir>/token (mode 0600) and its path is
logged. --no-auth turns auth off, on a loopback address only. A running job's
desktop and Jupyter open in a browser with a one-time link from
'agentbox view JOB_ID', which never carries the token; the link's cookie is
signed with <data dir>/viewer.key (or AGENTBOX_VIEWER_KEY_FILE), so it
outlives a restart.

Roles (--role, AGENTBOX_ROLE): all runs everything in one process. With a
PostgreSQL store, any number of api replicas (REST, SSE and the UI; no
sandboxes) and worker processes (each claims jobs and runs them on its own
engine, serving only an internal endpoint on --addr, authenticated with
AGENTBOX_CLUSTER_SECRET) share the jobs; see docs/cluster.md.

On SIGTERM or Ctrl-C serve stops claiming jobs, gives running jobs the grace
period, then stops them and hands them back (pending) for the next start.`,
		Example: `  agentbox serve
  agentbox serve --addr 0.0.0.0:8080 --data-dir /srv/agentbox --concurrency 4
  agentbox serve --store postgres://agentbox@db.internal/agentbox
  agentbox serve --role api --addr 0.0.0.0:8080 --store postgres://agentbox@db.internal/agentbox
  AGENTBOX_CLUSTER_SECRET=... agentbox serve --role worker --addr 0.0.0.0:8081 --store postgres://agentbox@db.internal/agentbox
  AGENTBOX_TOKEN=secret agentbox serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serve(cmd)
		},
	}
	s := &a.flagCfg.Server
	f := cmd.Flags()
	f.StringVar(&s.Addr, "addr", "", config.Lookup("AGENTBOX_ADDR").Usage("listen address"))
	f.StringVar(&a.flagCfg.DataDir, "data-dir", "", "data directory (AGENTBOX_DATA_DIR; default ~/.local/share/agentbox)")
	f.StringVar(&a.flagCfg.Store, "store", "", "job store: sqlite (agentbox.db in the data dir) or a postgres://user@host/db URL, its password in PGPASSWORD or ~/.pgpass, not on the command line (AGENTBOX_STORE; default sqlite)")
	f.StringVar(&a.flagCfg.Role, "role", "", "what this process runs: all (the API and the jobs), api (REST, SSE and the UI; no sandboxes) or worker (runs jobs; serves only the internal endpoint); api and worker share a postgres:// store, a worker needs AGENTBOX_CLUSTER_SECRET (AGENTBOX_ROLE; default "+config.Lookup("AGENTBOX_ROLE").Default+"; see docs/cluster.md)")
	f.StringVar(&a.flagCfg.Blobs, "blobs", "", "where workspace checkpoints and final artifacts go, so a job survives a lost worker and every API replica serves its files: postgres (the job store's database), the absolute path of a directory every host mounts, or none (AGENTBOX_BLOBS; default postgres with a postgres:// store, else none; see docs/cluster.md)")
	f.IntVar(&s.Concurrency, "concurrency", 0, config.Lookup("AGENTBOX_CONCURRENCY").Usage("jobs run at once; 0 serves the API only"))
	f.BoolVar(&s.NoAuth, "no-auth", false, "turn auth off (loopback addresses only)")
	f.Var(durationVar(&s.Lease, 0), "lease", config.Lookup("AGENTBOX_LEASE").Usage("job lease without a heartbeat"))
	f.Var(durationVar(&s.JobTimeout, 0), "job-timeout", config.Lookup("AGENTBOX_JOB_TIMEOUT").Usage("default job timeout"))
	f.Var(durationVar(&s.Grace, 0), "grace", config.Lookup("AGENTBOX_GRACE").Usage("time running jobs get on shutdown; 0 stops them at once"))
	f.StringVar(&s.PublicURL, "public-url", "", "where clients reach the server, e.g. https://agentbox.example.com behind a TLS proxy: links are made absolute with it and viewer cookies are Secure with https (AGENTBOX_PUBLIC_URL)")
	f.StringVar(&s.ViewURL, "view-url", "", "give each job's desktop and Jupyter an origin of their own, e.g. https://{job}.view.example.com (a wildcard DNS name reaching this server), or http://{job}.localhost:8080 on one machine: a sandbox's pages then cannot reach other jobs' views or the API from the browser (AGENTBOX_VIEW_URL)")
	f.StringVar(&a.flagCfg.Agent.Kind, "agent", "", config.Lookup("AGENTBOX_AGENT").Usage("what works on jobs: model (a language model with tools) or shell (the task as a bash script)"))
	a.driverFlag(cmd)
	return cmd
}

// serve runs the server, its flags given on the command line winning over
// the environment.
func (a *app) serve(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if err := wiring.ApplyServeFlags(&a.cfg, cmd.Flags()); err != nil {
		return fmt.Errorf("%w: %w", errConfiguration, err)
	}
	srv, err := wiring.OpenServer(ctx, a.cfg, a.log)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Serve(ctx)
}

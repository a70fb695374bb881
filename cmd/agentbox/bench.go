package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

func newBenchCmd(a *app) *cobra.Command {
	var o bench.Options
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure sandbox create, exec and file round trips against plain docker run / docker exec",
		Long: `bench measures, in one run on this machine, agentbox's sandbox operations and
the plain engine doing the same through the docker CLI, and prints a Markdown
table with the ratio of the two:

  - sandbox create until a first exec returns, against 'docker run --rm IMAGE true'
  - create, exec and destroy, against the same 'docker run --rm'
  - the round trip of exec 'true', against 'docker exec CONTAINER true', over
    the unix socket and over TCP (the guest transports; TCP needs root)
  - a 1 MiB file written then read back, against docker exec with cat

It needs the engine, the sandbox image and the docker CLI. Results are
recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.benchSandboxes(cmd, &o, func() error {
				alt, err := a.altTransportDriver(o.Driver)
				if err != nil {
					fmt.Fprintf(o.Log, "the other guest transport is not measured: %v\n", err)
				} else {
					defer alt.Close()
					o.AltDriver = alt
				}
				rows, err := bench.Run(cmd.Context(), o)
				if err == nil {
					bench.Markdown(cmd.OutOrStdout(), rows)
				}
				return err
			})
		},
	}
	cmd.AddCommand(newBenchAPICmd(a), newBenchGUICmd(a))
	cmd.Flags().IntVar(&o.Creates, "creates", 10, "sandboxes to create")
	cmd.Flags().IntVar(&o.Execs, "execs", 200, "exec round trips (the docker exec baseline runs a tenth as many)")
	cmd.Flags().IntVar(&o.Files, "files", 50, "1 MiB write+read cycles")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	a.driverFlag(cmd)
	return cmd
}

func newBenchAPICmd(a *app) *cobra.Command {
	var o bench.LoadOptions
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Measure the REST API's durable job creates and status reads per second",
		Long: `api starts an API-only agentbox server (no workers) on a loopback port with
a fresh SQLite store in a temporary directory (synchronous=FULL: every create
is on disk before its 201), then drives it over real HTTP from --clients
concurrent connections: POST /v1/jobs for --duration, then GET /v1/jobs/{id}
for --duration. Server and load generator share this machine's cores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, token, stop, err := startBenchServer(cmd.Context(), a)
			if err != nil {
				return err
			}
			defer stop()
			o.URL, o.Token = url, token
			rs, err := bench.Load(cmd.Context(), o)
			if err != nil {
				return err
			}
			bench.LoadMarkdown(cmd.OutOrStdout(), rs)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Clients, "clients", 32, "concurrent connections")
	cmd.Flags().DurationVar(&o.Duration, "duration", 10*time.Second, "length of each phase")
	return cmd
}

// startBenchServer serves the API over a fresh store on a loopback port.
func startBenchServer(ctx context.Context, a *app) (url, token string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "agentbox-bench-")
	if err != nil {
		return "", "", nil, err
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	token = "bench-token"
	svc := jobs.NewService(st, workspace.NewLocal(dir), 3, nil)
	h := api.New(api.Config{Tokens: []string{token}}, svc, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	return "http://" + l.Addr().String(), token, func() {
		srv.Close()
		st.Close()
		os.RemoveAll(dir)
	}, nil
}

func newBenchGUICmd(a *app) *cobra.Command {
	var o bench.Options
	cmd := &cobra.Command{
		Use:   "gui",
		Short: "Measure the desktop and notebook stack: memory, cold starts, screenshots, kernel runs",
		Long: `bench gui creates one sandbox and measures what the desktop and Jupyter stack
costs: the guest's idle memory and the sandbox's memory before the stack
starts, with the desktop running and with the notebook server and a kernel
too; the cold start of each; and screenshots and warm kernel executions
against the plain engine doing the same through docker exec (ImageMagick's
import, a fresh python3). Results are recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.benchSandboxes(cmd, &o, func() error {
				r, err := bench.GUI(cmd.Context(), o)
				if err == nil {
					bench.GUIMarkdown(cmd.OutOrStdout(), r)
				}
				return err
			})
		},
	}
	cmd.Flags().IntVar(&o.Execs, "samples", 20, "screenshots and kernel runs to time (the docker exec baselines run half as many)")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	a.driverFlag(cmd)
	return cmd
}

// altTransportDriver is the configured driver with the other guest
// transport than d's: TCP beside the unix socket, or the unix socket
// beside TCP.
func (a *app) altTransportDriver(d sandbox.Driver) (sandbox.Driver, error) {
	alt := *a
	alt.cfg.Sandbox.GuestTransport = sandbox.TransportTCP
	if d.Capabilities().Transport == sandbox.TransportTCP {
		alt.cfg.Sandbox.GuestTransport = sandbox.TransportUnix
	}
	return alt.newDriver()
}

// benchSandboxes runs measure with o set up to use the configured driver,
// closed afterwards.
func (a *app) benchSandboxes(cmd *cobra.Command, o *bench.Options, measure func() error) error {
	d, err := a.newDriver()
	if err != nil {
		return err
	}
	defer d.Close()
	o.Driver, o.Image, o.Log = d, a.cfg.Sandbox.Image, cmd.ErrOrStderr()
	return measure()
}

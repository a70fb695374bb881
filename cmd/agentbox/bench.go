package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newBenchCmd(a *app) *cobra.Command {
	var o bench.Options
	var isolation string
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
  - the start of 'python3 -c pass', against docker exec of the same
  - 1 GiB written into the workspace and the zip of a 5,000-file workspace
    (left out with --no-workspace)
  - the memory of an idle sandbox on the host (its cgroup's usage and the
    PSS of its processes), against a plain container running sleep

--isolation gvisor measures the gvisor tier: its sandboxes run under runsc,
and so do the baselines' containers (docker run --runtime=runsc), so each
ratio compares like with like. --isolation microvm measures the microvm
tier: its sandboxes are QEMU VMs (KVM where it runs guests, else TCG, as
the header says), against plain containers under the engine's default
runtime (docker exec into a container started for the baselines); the idle
memory is then the PSS of QEMU and its virtiofsd.

It needs the engine on this host, the sandbox image and the docker CLI.
Results are recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wiring.RunBenchTier(cmd.Context(), a.cfg, a.log, o, isolation, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(newBenchAPICmd(a), newBenchGUICmd(a), newBenchUploadCmd(a), newBenchUICmd(a), newBenchStoreCmd(), newBenchDrainCmd(a), newBenchCheckpointCmd(a))
	cmd.Flags().IntVar(&o.Creates, "creates", 10, "sandboxes to create")
	cmd.Flags().IntVar(&o.Execs, "execs", 200, "exec round trips (the docker exec baseline runs a tenth as many)")
	cmd.Flags().IntVar(&o.Files, "files", 50, "1 MiB write+read cycles")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	cmd.Flags().StringVar(&isolation, "isolation", sandbox.IsolationContainer, "isolation tier to measure: container, gvisor (its baselines run under runsc too) or microvm; one that cannot run here is refused (exit 2)")
	cmd.Flags().BoolVar(&o.NoWorkspace, "no-workspace", false, "leave out the slow workspace rows (1 GiB written, a 5,000-file zip)")
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
			return wiring.RunBenchAPI(cmd.Context(), a.cfg, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.Clients, "clients", 32, "concurrent connections")
	cmd.Flags().Var(durationVar(&o.Duration, 10*time.Second), "duration", "length of each phase")
	return cmd
}

func newBenchUICmd(a *app) *cobra.Command {
	var o bench.UIOptions
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Measure the web UI's server time: the job list and a long job's page over a large store",
		Long: `ui fills a fresh SQLite store in a temporary directory with --jobs jobs, the
newest with --steps agent steps (a model answer, a tool call and a tool result
each), then starts an API-only agentbox server on it on a loopback port, signs
in to the web UI with the token, and times --requests requests, one at a time,
of the job list's first page (GET /) and of the long job's page
(GET /jobs/{id}) as a browser's navigation sends them, and of
GET /v1/jobs?limit=50 with the bearer token for comparison. Each time is from
the request's start to the answer's last byte over loopback: the server's
time, and the kernel's. Results are recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wiring.RunBenchUI(cmd.Context(), a.cfg, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.Jobs, "jobs", 10000, "jobs in the store")
	cmd.Flags().IntVar(&o.Steps, "steps", 2000, "steps of the long job")
	cmd.Flags().IntVar(&o.Requests, "requests", 50, "requests to time of each page")
	return cmd
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
			return wiring.RunBenchGUI(cmd.Context(), a.cfg, a.log, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&o.Execs, "samples", 20, "screenshots and kernel runs to time (the docker exec baselines run half as many)")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	a.driverFlag(cmd)
	return cmd
}

func newBenchUploadCmd(a *app) *cobra.Command {
	var o bench.UploadOptions
	var size string
	cmd := &cobra.Command{
		Use:   "upload",
		Short: "Measure a job started from an uploaded project against docker cp of the same tree",
		Long: `upload generates a project (--files files, --size bytes in all, four in five
of them random bytes that no compressor shrinks, sizes from a few bytes to a
few MiB in a hundred directories) and starts jobs from it, one at a time, on
an agentbox server with one worker on a loopback port (a fresh data dir in
a temporary directory; the shell agent runs the task, whose first and only
tool call counts the files it was given). It times each from the submit
(packed as a tar.gz as it is sent, unpacked by the server) to the 201, and
to the job's first tool call (the sandbox created on the workspace), and
compares them with docker cp of the same tree into a running container of
the sandbox image (docker run -d, then docker cp timed), and into a
container started for it (docker run -d and docker cp timed together).
Results are recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := units.ParseSize(size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			o.Bytes = n
			return wiring.RunBenchUpload(cmd.Context(), a.cfg, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&o.Samples, "samples", 5, "uploads and docker cps to time, after one warm-up each")
	cmd.Flags().IntVar(&o.Files, "files", 5000, "files of the project")
	size = "50000000"
	cmd.Flags().Var(sizeVar(&size), "size", "bytes of the project, e.g. 50000000 or 200m")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	a.driverFlag(cmd)
	return cmd
}

func newBenchStoreCmd() *cobra.Command {
	var o bench.StoreOptions
	var pgURL string
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Compare the job stores: SQLite and PostgreSQL, durable creates, status reads and claim latency",
		Long: `store measures each job store in the same run: SQLite as agentbox serve opens
it (a file in a temporary directory), and PostgreSQL at --postgres, or, without
it, on a durable server of Debian's postgresql package (fsync on) that it
starts in a temporary directory as the postgres user and removes afterwards.

For each: --creates durable job creates and --reads status reads (GetJob of a
random job) on --concurrency goroutines, as rates; then --claims submit → claim
round trips, one at a time: a job created on the submitter's store and claimed
by an idle worker on a store of its own (for PostgreSQL another connection
pool, woken by LISTEN/NOTIFY as another replica is; for SQLite the same
process's signal), timed from the create to the claim. Results are recorded
in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wiring.RunBenchStore(cmd.Context(), pgURL, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&pgURL, "postgres", "", "the PostgreSQL database to measure (postgres://…); empty starts a local server")
	cmd.Flags().IntVar(&o.Creates, "creates", 5000, "durable job creates")
	cmd.Flags().IntVar(&o.Reads, "reads", 50000, "status reads")
	cmd.Flags().IntVar(&o.Claims, "claims", 200, "submit → claim round trips")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", 8, "goroutines for creates and reads")
	return cmd
}

func newBenchDrainCmd(a *app) *cobra.Command {
	var o bench.DrainOptions
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Measure a cluster draining a queue: jobs/s of --workers workers on one PostgreSQL",
		Long: `drain starts a cluster in this process: a durable PostgreSQL server of
Debian's postgresql package in a temporary directory, one API replica and
--workers workers (each with a data dir of its own and --concurrency slots),
the workers running each job's task as a bash script in a sandbox of the local
engine. It queues --jobs jobs of the task "true" through the API (8 clients),
then waits until none is pending or running, and prints how long the queue
took to drain and the jobs per second. Results are recorded in
docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wiring.RunBenchDrain(cmd.Context(), a.cfg, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.Jobs, "jobs", 1000, "jobs to queue")
	cmd.Flags().IntVar(&o.Workers, "workers", 4, "workers")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", 2, "jobs each worker runs at once")
	return cmd
}

// Package bench measures agentbox's sandbox operations against the plain
// engine CLI in the same run, so the ratios hold on any machine.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Options says what to measure with.
type Options struct {
	Driver  sandbox.Driver
	Image   string
	Docker  string // the docker CLI for the baselines, default "docker"
	Creates int    // sandboxes to create (default 10)
	Execs   int    // exec round trips (default 200; the CLI baseline runs a tenth)
	Files   int    // 1 MiB write+read cycles (default 50)
	Log     io.Writer

	// Runtime is the engine runtime of the sandboxes measured (Driver's
	// tier): "" for the engine's default (runc), "runsc" for gvisor. The
	// baselines' containers run under it too, so each ratio compares like
	// with like.
	Runtime string
	// NoWorkspace leaves out the workspace rows (1 GiB written, a
	// 5,000-file zip), the slowest.
	NoWorkspace bool

	// AltDriver, if set, is the same engine's driver with another guest
	// transport (TCP beside the unix socket): its exec round trip is
	// measured beside Driver's.
	AltDriver sandbox.Driver
}

// Row is one comparison: agentbox against the engine doing the same.
type Row struct {
	Name, Baseline string
	Ours, Base     Stats
}

// Stats summarises samples.
type Stats struct {
	N             int
	P50, P95, Min time.Duration
}

// Run measures everything and returns the rows.
func Run(ctx context.Context, o Options) ([]Row, error) {
	o = o.withDefaults()
	var rows []Row
	measures := []func(context.Context, Options) (Row, error){createRow}
	if o.Driver.Capabilities().Bind {
		measures = append(measures, bindRow) // a pooled sandbox's two steps
	}
	measures = append(measures, lifecycleRow, execRow)
	if o.AltDriver != nil {
		measures = append(measures, func(ctx context.Context, o Options) (Row, error) {
			o.Driver = o.AltDriver
			return execRow(ctx, o)
		})
	}
	measures = append(measures, fileRow, pythonRow)
	if !o.NoWorkspace {
		measures = append(measures, writeRow, zipRow)
	}
	for _, m := range measures {
		r, err := m(ctx, o)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (o Options) withDefaults() Options {
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if o.Creates <= 0 {
		o.Creates = 10
	}
	if o.Execs <= 0 {
		o.Execs = 200
	}
	if o.Files <= 0 {
		o.Files = 50
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func createRow(ctx context.Context, o Options) (Row, error) {
	fmt.Fprintf(o.Log, "create -> first exec: %d sandboxes, %d docker runs\n", o.Creates, o.Creates)
	// Each sandbox is destroyed after its sample, untimed, so that idle
	// sandboxes (a microVM's is ~0.5 GiB and a share of a CPU under TCG)
	// do not pile up and slow the next creates.
	var last sandbox.Sandbox
	destroy := func() {
		if last != nil {
			last.Destroy(context.WithoutCancel(ctx))
			last = nil
		}
	}
	defer destroy()
	ours, err := sampleThen(o.Creates, func() error {
		s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
		if err != nil {
			return err
		}
		last = s
		return execTrue(ctx, s.Guest())
	}, destroy)
	if err != nil {
		return Row{}, err
	}
	base, err := dockerRun(ctx, o)
	return Row{Name: "sandbox create → first exec returns", Baseline: o.runLabel("--rm IMAGE true"), Ours: ours, Base: base}, err
}

// lifecycleRow times a sandbox's whole life, destroy included, which is
// what docker run --rm does.
func lifecycleRow(ctx context.Context, o Options) (Row, error) {
	fmt.Fprintf(o.Log, "create -> exec -> destroy: %d sandboxes, %d docker runs\n", o.Creates, o.Creates)
	ours, err := sample(o.Creates, func() error {
		s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
		if err != nil {
			return err
		}
		err = execTrue(ctx, s.Guest())
		if derr := s.Destroy(ctx); err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		return Row{}, err
	}
	base, err := dockerRun(ctx, o)
	return Row{Name: "create → exec → destroy", Baseline: o.runLabel("--rm IMAGE true"), Ours: ours, Base: base}, err
}

func dockerRun(ctx context.Context, o Options) (Stats, error) {
	return sample(o.Creates, func() error {
		return run(ctx, o.Docker, o.runArgs("--rm", "--network", "none", o.Image, "true")...)
	})
}

// execRow times the exec round trip over o.Driver's guest transport.
func execRow(ctx context.Context, o Options) (Row, error) {
	transport := transportName(o.Driver.Capabilities().Transport)
	return execRowOf(ctx, o, o.Execs, "exec round trip of `true` ("+transport+")", "true")
}

// execRowOf times n guest execs of argv in one fresh sandbox against a
// tenth as many (at least 5) docker execs of it into the same container.
func execRowOf(ctx context.Context, o Options, n int, name string, argv ...string) (Row, error) {
	s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
	if err != nil {
		return Row{}, err
	}
	defer s.Destroy(ctx)
	ref, cleanup, err := baselineContainer(ctx, o, s)
	if err != nil {
		return Row{}, err
	}
	defer cleanup()
	nBase := max(n/10, 5)
	fmt.Fprintf(o.Log, "%s: %d guest execs, %d docker execs\n", name, n, nBase)
	ours, err := sample(n, func() error { return execArgv(ctx, s.Guest(), argv...) })
	if err != nil {
		return Row{}, err
	}
	base, err := sample(nBase, func() error { return run(ctx, o.Docker, append([]string{"exec", ref}, argv...)...) })
	return Row{Name: name, Baseline: "docker exec CONTAINER " + strings.Join(argv, " "), Ours: ours, Base: base}, err
}

// transportName says in words how the host reaches the guest.
func transportName(t string) string {
	switch t {
	case sandbox.TransportUnix:
		return "unix socket"
	case sandbox.TransportTCP:
		return "TCP in the sandbox's netns"
	}
	return t
}

// container is a sandbox that is a container the docker CLI reaches (the
// Docker driver's): the baselines exec into it.
type container interface{ ContainerID() string }

// baselineContainer is the container the docker exec baselines of
// sandbox s run in: s itself when it is a container, else (a microVM) a
// plain container of the image started for them, removed by the cleanup.
func baselineContainer(ctx context.Context, o Options, s sandbox.Sandbox) (string, func(), error) {
	if c, ok := s.(container); ok {
		return c.ContainerID(), func() {}, nil
	}
	return plainContainer(ctx, o, "")
}

func fileRow(ctx context.Context, o Options) (Row, error) {
	s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
	if err != nil {
		return Row{}, err
	}
	defer s.Destroy(ctx)
	data := bytes.Repeat([]byte("agentbox"), 1<<17) // 1 MiB
	fmt.Fprintf(o.Log, "1 MiB write + read back: %d cycles each\n", o.Files)
	ours, err := sample(o.Files, func() error {
		if _, err := s.Guest().WriteFile(ctx, "bench.bin", data, 0); err != nil {
			return err
		}
		back, err := s.Guest().ReadFile(ctx, "bench.bin")
		return same(back, data, err)
	})
	if err != nil {
		return Row{}, err
	}
	ref, cleanup, err := baselineContainer(ctx, o, s)
	if err != nil {
		return Row{}, err
	}
	defer cleanup()
	base, err := sample(max(o.Files/5, 5), func() error {
		in := exec.CommandContext(ctx, o.Docker, "exec", "-i", ref, "sh", "-c", "cat > /workspace/cli.bin")
		in.Stdin = bytes.NewReader(data)
		if out, err := in.CombinedOutput(); err != nil {
			return fmt.Errorf("docker exec write: %v: %s", err, out)
		}
		back, err := exec.CommandContext(ctx, o.Docker, "exec", ref, "cat", "/workspace/cli.bin").Output()
		return same(back, data, err)
	})
	return Row{Name: "1 MiB file written then read back", Baseline: "docker exec -i … cat > f; docker exec … cat f", Ours: ours, Base: base}, err
}

func execTrue(ctx context.Context, g *guest.Client) error { return execArgv(ctx, g, "true") }

func execArgv(ctx context.Context, g *guest.Client, argv ...string) error {
	res, err := g.Exec(ctx, guest.ExecRequest{Cmd: argv})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%s exited %d: %s", strings.Join(argv, " "), res.ExitCode, res.Stderr)
	}
	return err
}

func same(got, want []byte, err error) error {
	if err == nil && !bytes.Equal(got, want) {
		err = fmt.Errorf("read back %d bytes, not the %d written", len(got), len(want))
	}
	return err
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// sample times f n times, after one untimed warm-up call.
func sample(n int, f func() error) (Stats, error) {
	return sampleThen(n, f, func() {})
}

// sampleThen is sample with after run, untimed, after each call of f.
func sampleThen(n int, f func() error, after func()) (Stats, error) {
	err := f()
	after()
	if err != nil {
		return Stats{}, err
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		begin := time.Now()
		err := f()
		ds = append(ds, time.Since(begin))
		after()
		if err != nil {
			return Stats{}, err
		}
	}
	return summarize(ds), nil
}

func summarize(ds []time.Duration) Stats {
	slices.Sort(ds)
	pct := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return Stats{N: len(ds), P50: pct(0.50), P95: pct(0.95), Min: ds[0]}
}

// Markdown renders rows as a table; Speedup is the baseline's p50 over ours.
func Markdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| operation | agentbox p50 | agentbox p95 | baseline | baseline p50 | baseline p95 | speed-up (p50) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | `%s` | %s | %s | %.1f× |\n", r.Name, ms(r.Ours.P50), ms(r.Ours.P95),
			r.Baseline, ms(r.Base.P50), ms(r.Base.P95), float64(r.Base.P50)/float64(r.Ours.P50))
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// GUIResult is what the desktop and notebook stack costs.
type GUIResult struct {
	// GuestRSS is the guest daemon's resident memory while idle (mostly
	// the static binary's file pages).
	GuestRSS int64
	// Idle, Desktop and Jupyter are the sandbox's memory before anything of
	// the stack ran, with the desktop running, and with the notebook server
	// and a kernel as well.
	Idle, Desktop, Jupyter Memory
	// DesktopStart and KernelStart are the cold starts: the first desktop
	// call, and the first execution (notebook server plus kernel).
	DesktopStart, KernelStart time.Duration
	// Rows compare screenshots and warm kernel executions with the plain
	// engine doing the same through docker exec.
	Rows []Row
}

// GUI measures the desktop and notebook stack in one fresh sandbox.
func GUI(ctx context.Context, o Options) (GUIResult, error) {
	o = o.withDefaults()
	s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
	if err != nil {
		return GUIResult{}, err
	}
	defer s.Destroy(context.WithoutCancel(ctx))
	g := s.Guest()
	ref, cleanup, err := baselineContainer(ctx, o, s)
	if err != nil {
		return GUIResult{}, err
	}
	defer cleanup()
	var r GUIResult
	if r.GuestRSS, r.Idle, err = memory(ctx, g); err != nil {
		return r, err
	}
	fmt.Fprintln(o.Log, "desktop: cold start, then screenshots")
	if r.DesktopStart, err = timed(func() error { _, err := g.DesktopStart(ctx); return err }); err != nil {
		return r, err
	}
	if _, r.Desktop, err = memory(ctx, g); err != nil {
		return r, err
	}
	shot, err := screenshotRow(ctx, o, g, ref)
	if err != nil {
		return r, err
	}
	fmt.Fprintln(o.Log, "kernel: cold start, then warm executions")
	if r.KernelStart, err = timed(func() error { return kernelRun(ctx, g) }); err != nil {
		return r, err
	}
	if _, r.Jupyter, err = memory(ctx, g); err != nil {
		return r, err
	}
	kernel, err := kernelRow(ctx, o, g, ref)
	r.Rows = []Row{shot, kernel}
	return r, err
}

func screenshotRow(ctx context.Context, o Options, g *guest.Client, ref string) (Row, error) {
	n := o.Execs
	ours, err := sample(n, func() error {
		res, err := g.Desktop(ctx, guest.DesktopAction{Action: "screenshot"})
		if err == nil && !bytes.HasPrefix(res.PNG, []byte("\x89PNG")) {
			err = fmt.Errorf("screenshot is not a PNG (%d bytes)", len(res.PNG))
		}
		return err
	})
	if err != nil {
		return Row{}, err
	}
	base, err := sample(max(n/2, 5), func() error {
		return run(ctx, o.Docker, "exec", "-e", "DISPLAY="+guest.Display, ref, "import", "-window", "root", "png:/tmp/shot.png")
	})
	return Row{Name: "desktop screenshot (PNG)", Baseline: "docker exec -e DISPLAY=:1 CONTAINER import -window root png:f", Ours: ours, Base: base}, err
}

func kernelRow(ctx context.Context, o Options, g *guest.Client, ref string) (Row, error) {
	n := o.Execs
	ours, err := sample(n, func() error { return kernelRun(ctx, g) })
	if err != nil {
		return Row{}, err
	}
	base, err := sample(max(n/2, 5), func() error { return run(ctx, o.Docker, "exec", ref, "python3", "-c", "x = 6 * 7") })
	return Row{Name: "python `x = 6 * 7` (warm kernel)", Baseline: "docker exec CONTAINER python3 -c …", Ours: ours, Base: base}, err
}

func kernelRun(ctx context.Context, g *guest.Client) error {
	res, err := g.KernelExecute(ctx, guest.KernelRequest{Code: "x = 6 * 7", TimeoutMS: 60_000})
	if err == nil && res.Error != nil {
		err = fmt.Errorf("kernel: %s: %s", res.Error.Name, res.Error.Value)
	}
	return err
}

// Memory is a sandbox cgroup's memory: Usage is what its limit counts
// (page cache included), Anon the processes' own (anonymous) memory.
type Memory struct {
	Usage, Anon int64
}

// memoryScript prints the guest's VmRSS, then the cgroup's usage and
// anonymous memory (cgroup v2 memory.current and anon, else v1's
// usage_in_bytes and total_rss), in bytes.
const memoryScript = `awk '/^VmRSS:/ {print $2 * 1024}' /proc/%d/status
if [ -e /sys/fs/cgroup/memory.current ]; then
  cat /sys/fs/cgroup/memory.current; awk '$1 == "anon" {print $2}' /sys/fs/cgroup/memory.stat
else
  cat /sys/fs/cgroup/memory/memory.usage_in_bytes; awk '$1 == "total_rss" {print $2}' /sys/fs/cgroup/memory/memory.stat
fi`

// memory reads, from inside the sandbox, the guest's resident memory and
// the sandbox cgroup's memory.
func memory(ctx context.Context, g *guest.Client) (guestRSS int64, m Memory, err error) {
	h, err := g.Health(ctx)
	if err != nil {
		return 0, m, err
	}
	res, err := g.Exec(ctx, guest.Shell(fmt.Sprintf(memoryScript, h.PID)))
	if err != nil {
		return 0, m, err
	}
	f := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(f) != 3 {
		return 0, m, fmt.Errorf("read memory: exit %d: %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	var n [3]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, m, fmt.Errorf("read memory: %q: %w", res.Stdout, err)
		}
	}
	return n[0], Memory{Usage: n[1], Anon: n[2]}, nil
}

func timed(f func() error) (time.Duration, error) {
	begin := time.Now()
	err := f()
	return time.Since(begin), err
}

// GUIMarkdown renders r.
func GUIMarkdown(w io.Writer, r GUIResult) {
	fmt.Fprintln(w, "| state | sandbox memory (cgroup usage, page cache included) | processes' own (anonymous) memory |")
	fmt.Fprintln(w, "|---|---|---|")
	row := func(name string, m Memory) { fmt.Fprintf(w, "| %s | %s | %s |\n", name, mib(m.Usage), mib(m.Anon)) }
	row(fmt.Sprintf("idle: the guest only (its RSS %s, mostly the binary's file pages)", mib(r.GuestRSS)), r.Idle)
	row("desktop running (Xvfb, openbox, x11vnc, websockify)", r.Desktop)
	row("desktop + Jupyter server + Python kernel", r.Jupyter)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Cold starts: desktop %s, notebook server + kernel + first execution %s.\n\n", ms(r.DesktopStart), ms(r.KernelStart))
	Markdown(w, r.Rows)
}

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
	// GuestRSS is the guest daemon's resident memory while idle, and
	// IdleMemory the whole sandbox's (its cgroup's usage) before anything
	// of the stack ran.
	GuestRSS, IdleMemory int64
	// DesktopMemory is the sandbox's usage with the desktop running, and
	// JupyterMemory with the notebook server and a kernel as well.
	DesktopMemory, JupyterMemory int64
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
	s, err := o.Driver.Create(ctx, sandbox.Spec{JobID: "bench"})
	if err != nil {
		return GUIResult{}, err
	}
	defer s.Destroy(context.WithoutCancel(ctx))
	g, ref := s.Guest(), s.Handle().Ref
	var r GUIResult
	if r.GuestRSS, r.IdleMemory, err = memory(ctx, g); err != nil {
		return r, err
	}
	fmt.Fprintln(o.Log, "desktop: cold start, then screenshots")
	if r.DesktopStart, err = timed(func() error { _, err := g.DesktopStart(ctx); return err }); err != nil {
		return r, err
	}
	if _, r.DesktopMemory, err = memory(ctx, g); err != nil {
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
	if _, r.JupyterMemory, err = memory(ctx, g); err != nil {
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

// memory reads, from inside the sandbox, the guest's resident memory and
// the sandbox cgroup's usage (cgroup v2 memory.current, else v1).
func memory(ctx context.Context, g *guest.Client) (guestRSS, cgroup int64, err error) {
	h, err := g.Health(ctx)
	if err != nil {
		return 0, 0, err
	}
	script := fmt.Sprintf(`awk '/^VmRSS:/ {print $2 * 1024}' /proc/%d/status; `+
		`cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes`, h.PID)
	res, err := g.Exec(ctx, guest.Shell(script))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(f) != 2 {
		return 0, 0, fmt.Errorf("read memory: exit %d: %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	guestRSS, err1 := strconv.ParseInt(f[0], 10, 64)
	cgroup, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("read memory: %q", res.Stdout)
	}
	return guestRSS, cgroup, nil
}

func timed(f func() error) (time.Duration, error) {
	begin := time.Now()
	err := f()
	return time.Since(begin), err
}

// GUIMarkdown renders r.
func GUIMarkdown(w io.Writer, r GUIResult) {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Fprintln(w, "| state | sandbox memory (cgroup) |")
	fmt.Fprintln(w, "|---|---|")
	fmt.Fprintf(w, "| idle: guest only (guest RSS %s) | %s |\n", mib(r.GuestRSS), mib(r.IdleMemory))
	fmt.Fprintf(w, "| desktop running (Xvfb, openbox, x11vnc, websockify) | %s |\n", mib(r.DesktopMemory))
	fmt.Fprintf(w, "| desktop + Jupyter server + Python kernel | %s |\n", mib(r.JupyterMemory))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Cold starts: desktop %s, notebook server + kernel + first execution %s.\n\n", ms(r.DesktopStart), ms(r.KernelStart))
	Markdown(w, r.Rows)
}

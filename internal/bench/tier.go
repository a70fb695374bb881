package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// What an isolation tier costs: the same rows under the tier's engine
// runtime, the baselines under it too, and the memory an idle sandbox
// holds on the host.

// runArgs is `docker run` with args, under o.Runtime.
func (o Options) runArgs(args ...string) []string {
	out := []string{"run"}
	if o.Runtime != "" {
		out = append(out, "--runtime="+o.Runtime)
	}
	return append(out, args...)
}

// runLabel names the baseline `docker run` of args under o.Runtime.
func (o Options) runLabel(args string) string {
	return "docker " + strings.Join(o.runArgs(args), " ")
}

// pythonRow times the start of a python3 that does nothing: the cost of
// exec'ing a real interpreter (its many file opens and mmaps), which is
// where a user-space kernel such as gVisor's pays.
func pythonRow(ctx context.Context, o Options) (Row, error) {
	return execRowOf(ctx, o, max(o.Execs/4, 5), "`python3 -c pass` start", "python3", "-c", "pass")
}

// HostMemory is a container's memory as its host sees it.
type HostMemory struct {
	// Cgroup is the container's memory cgroup's usage (v2 memory.current,
	// v1 memory.usage_in_bytes): what its limit counts, page cache included.
	Cgroup int64
	// PSS is the sum of the proportional set sizes of the processes in
	// that cgroup (/proc/PID/smaps_rollup), Procs how many there are. Under
	// gVisor these are runsc's own (sandbox, gofer and their helpers).
	PSS   int64
	Procs []string
}

// IdleResult is the memory of an idle sandbox against a plain container
// of the image running sleep, under the same runtime.
type IdleResult struct {
	Sandbox, Plain HostMemory
}

// Idle measures, from the host, the memory of a fresh sandbox once its
// first exec returned, and of a plain `docker run -d IMAGE sleep`.
func Idle(ctx context.Context, o Options) (IdleResult, error) {
	o = o.withDefaults()
	fmt.Fprintln(o.Log, "memory of an idle sandbox and of a plain container")
	s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench"})
	if err != nil {
		return IdleResult{}, err
	}
	defer s.Destroy(context.WithoutCancel(ctx))
	if err := execTrue(ctx, s.Guest()); err != nil {
		return IdleResult{}, err
	}
	var r IdleResult
	if r.Sandbox, err = sandboxMemory(ctx, o.Docker, s); err != nil {
		return r, err
	}
	plain, cleanup, err := plainContainer(ctx, o, "")
	if err != nil {
		return r, err
	}
	defer cleanup()
	r.Plain, err = hostMemory(ctx, o.Docker, plain)
	return r, err
}

// hostProcesses is a sandbox that is host processes rather than a
// container (a microVM: QEMU and its virtiofsd).
type hostProcesses interface{ HostPIDs() []int }

// sandboxMemory is sandbox s's memory on the host: its container's
// cgroup, or, for a microVM, the PSS of its host processes (Cgroup -1:
// they have no cgroup of their own).
func sandboxMemory(ctx context.Context, docker string, s sandbox.Sandbox) (HostMemory, error) {
	if c, ok := s.(container); ok {
		return hostMemory(ctx, docker, c.ContainerID())
	}
	p, ok := s.(hostProcesses)
	if !ok {
		return HostMemory{}, fmt.Errorf("bench: the %s driver's sandboxes are neither containers nor host processes", s.Handle().Driver)
	}
	m := HostMemory{Cgroup: -1}
	for _, pid := range p.HostPIDs() {
		pss, name, err := processPSS(strconv.Itoa(pid))
		if err != nil {
			return m, err
		}
		m.PSS += pss
		m.Procs = append(m.Procs, name)
	}
	return m, nil
}

// hostMemory reads container ref's memory cgroup and its processes' PSS
// through /proc and /sys/fs/cgroup: the engine must be on this host.
func hostMemory(ctx context.Context, docker, ref string) (HostMemory, error) {
	out, err := exec.CommandContext(ctx, docker, "inspect", "-f", "{{.State.Pid}}", ref).Output()
	if err != nil {
		return HostMemory{}, fmt.Errorf("docker inspect %s: %w", ref, err)
	}
	dir, usage, err := memoryCgroup(strings.TrimSpace(string(out)))
	if err != nil {
		return HostMemory{}, err
	}
	var m HostMemory
	if m.Cgroup, err = readInt(filepath.Join(dir, usage)); err != nil {
		return m, err
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return m, fmt.Errorf("processes of the container's cgroup (is the engine on this host?): %w", err)
	}
	for _, pid := range strings.Fields(string(procs)) {
		pss, name, err := processPSS(pid)
		if err != nil {
			return m, err
		}
		m.PSS += pss
		m.Procs = append(m.Procs, name)
	}
	return m, nil
}

// memoryCgroup is the directory of process pid's memory cgroup and the
// name of its usage file there (cgroup v1's memory controller, else v2's).
func memoryCgroup(pid string) (dir, usage string, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", "", fmt.Errorf("the container's cgroup (is the engine on this host?): %w", err)
	}
	v2 := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) < 3:
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case strings.Contains(","+f[1]+",", ",memory,"):
			return filepath.Join("/sys/fs/cgroup/memory", f[2]), "memory.usage_in_bytes", nil
		}
	}
	if v2 == "" {
		return "", "", fmt.Errorf("process %s has no memory cgroup: %q", pid, b)
	}
	return filepath.Join("/sys/fs/cgroup", v2), "memory.current", nil
}

// processPSS is process pid's proportional set size in bytes and its
// name; a process that ended meanwhile counts nothing.
func processPSS(pid string) (int64, string, error) {
	name := processName(pid)
	f, err := os.Open("/proc/" + pid + "/smaps_rollup")
	if os.IsNotExist(err) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("PSS of process %s: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "Pss" {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, name, err
		}
	}
	return 0, "", fmt.Errorf("no Pss in /proc/%s/smaps_rollup: %w", pid, sc.Err())
}

// processName is pid's argv[0] (runsc names its processes so there), else
// its comm.
func processName(pid string) string {
	argv, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	if name, _, _ := strings.Cut(string(argv), "\x00"); name != "" {
		return filepath.Base(name)
	}
	comm, _ := os.ReadFile("/proc/" + pid + "/comm")
	return strings.TrimSpace(string(comm))
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// IdleMarkdown renders r as a table.
func IdleMarkdown(w io.Writer, r IdleResult) {
	fmt.Fprintln(w, "| idle | memory cgroup usage (page cache included) | PSS of the cgroup's processes | processes |")
	fmt.Fprintln(w, "|---|---|---|---|")
	row := func(name string, m HostMemory) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, mib(m.Cgroup), mib(m.PSS), countNames(m.Procs))
	}
	row("agentbox sandbox (after its first exec)", r.Sandbox)
	row("plain container (`sleep 3600`)", r.Plain)
}

// countNames lists names once each, in order, with how many there are.
func countNames(names []string) string {
	n := map[string]int{}
	var order []string
	for _, name := range names {
		if n[name]++; n[name] == 1 {
			order = append(order, name)
		}
	}
	for i, name := range order {
		if n[name] > 1 {
			order[i] = fmt.Sprintf("%d× %s", n[name], name)
		}
	}
	return strings.Join(order, ", ")
}

func mib(b int64) string {
	if b < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

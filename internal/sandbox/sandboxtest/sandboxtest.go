// Package sandboxtest is the conformance suite every sandbox driver passes.
// Each check runs from inside a real sandbox: the limits a driver promises
// are only real if a process in the sandbox meets them.
package sandboxtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Run runs the whole suite against d. The driver's image must have a POSIX
// shell with coreutils.
//
// Every case applies to every guest transport (unix socket, TCP with the
// sandbox's secret, vsock): each reaches the guest only through the
// client the driver built, and what a case checks (limits, files, output,
// recovery, removal) does not depend on how the bytes travel. Checks of a
// transport's own defences (a link planted at a socket, a request without
// the secret) are the driver's own tests.
func Run(t *testing.T, d sandbox.Driver) {
	t.Logf("driver: %+v", d.Capabilities())
	p := &plain{parent: t, d: d}
	run(t, d, "Identity", testIdentity)
	run(t, d, "NoNetwork", p.with(testNoNetwork))
	run(t, d, "Egress", testEgress)
	run(t, d, "Filesystem", testFilesystem)
	run(t, d, "Limits", testLimits)
	run(t, d, "ForkBomb", testForkBomb)
	run(t, d, "MemoryHog", testMemoryHog)
	run(t, d, "TimeoutKillsTree", p.with(testTimeoutKillsTree))
	run(t, d, "OutputFlood", p.with(testOutputFlood))
	run(t, d, "BinaryExact", p.with(testBinaryExact))
	run(t, d, "PathEscapes", p.with(testPathEscapes))
	run(t, d, "Recover", testRecover)
	run(t, d, "GuestDiesMidCall", testGuestDies)
	run(t, d, "DestroyLeavesNothing", testDestroy)
	run(t, d, "CallerWorkspaceSurvives", testCallerWorkspace)
	run(t, d, "DiskQuota", testDiskQuota)
	run(t, d, "Pause", testPause)
	run(t, d, "Exited", testExited)
	run(t, d, "BindLater", testBindLater)
}

// Gaps are the cases a tier does not pass, each with why: run skips them
// there, saying so. They are known defects or differences of the tier,
// written down here so that none is skipped silently.
var Gaps = map[string]map[string]string{
	sandbox.IsolationGVisor: {
		"Limits": "gVisor mounts no cgroupfs inside the sandbox, so the limits cannot be read there; " +
			"runsc applies them to the sandbox's host cgroup (ForkBomb and MemoryHog show what they do)",
		"ForkBomb": "known gap (issue 15): under runsc the pids limit bounds the whole sandbox's host threads " +
			"(the sentry's and, on the ptrace platform, one per guest thread); a fork bomb reaching it kills the sandbox, guest included, " +
			"rather than failing the bomb's forks",
		"MemoryHog": "known gap (issue 15): under runsc the memory limit is the host cgroup's and the OOM killer kills the sentry: " +
			"the whole sandbox dies rather than the hog alone",
	},
	// The fake driver's (internal/sandbox/fake): plain host processes,
	// for the tests that are not about isolation.
	"none": {
		"Identity":         "no isolation: commands run as the host user, with its capabilities, and no init process",
		"NoNetwork":        "no isolation: commands share the host's network",
		"Egress":           "no isolation: no network namespace of its own, so no egress listener on its loopback",
		"Filesystem":       "no isolation: commands see the host's filesystem, read-only root or not",
		"Limits":           "no isolation: no cgroup of its own",
		"ForkBomb":         "no isolation: no pids limit, so a fork bomb would reach the host's",
		"MemoryHog":        "no isolation: no memory limit, so a hog would reach the host's",
		"TimeoutKillsTree": "no isolation: no PID namespace, so counting the sleeps left counts the host's",
		"DiskQuota":        "no isolation: no disk quota",
		"BindLater":        "no mount namespace: commands see the job's workspace at its host path, not at /workspace (the fake's TestBindPauseAndRecover checks its Bind)",
	},
}

// run runs one case, or skips it with its reason where the driver's tier
// has a gap (Gaps).
func run(t *testing.T, d sandbox.Driver, name string, test func(*testing.T, sandbox.Driver)) {
	t.Run(name, func(t *testing.T) {
		if why := Gaps[d.Capabilities().Isolation][name]; why != "" {
			t.Skipf("%s tier: %s", d.Capabilities().Isolation, why)
		}
		test(t, d)
	})
}

var bg = context.Background()

// create makes a sandbox bound to bind (if given) with sandbox.Start, as
// agentbox makes its sandboxes, destroyed at the end of the test.
func create(t *testing.T, d sandbox.Driver, spec sandbox.Spec, bind ...sandbox.Binding) sandbox.Sandbox {
	t.Helper()
	var b sandbox.Binding
	if len(bind) > 0 {
		b = bind[0]
	}
	if b.JobID == "" {
		b.JobID = "conformance-" + strings.ReplaceAll(t.Name(), "/", "-")
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	s, err := sandbox.Start(ctx, d, spec, b)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(bg); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return s
}

// plain is the sandbox of the empty spec that the cases which only run
// commands in one share (NoNetwork, TimeoutKillsTree, OutputFlood,
// BinaryExact, PathEscapes): a sandbox costs seconds to make on some tiers
// (a microVM boots under TCG), and none of these cases is about what
// another left in it. The first case that runs makes it; it is destroyed
// when Run's test ends.
type plain struct {
	parent *testing.T // Run's
	d      sandbox.Driver
	once   sync.Once
	s      sandbox.Sandbox
}

// with adapts a case that takes the shared sandbox to run's signature.
func (p *plain) with(test func(*testing.T, sandbox.Sandbox)) func(*testing.T, sandbox.Driver) {
	return func(t *testing.T, _ sandbox.Driver) {
		// create fails the parent, which ends this case's goroutine too:
		// Go reports it as a subtest that called FailNow on a parent.
		p.once.Do(func() { p.s = create(p.parent, p.d, sandbox.Spec{}) })
		if p.s == nil {
			t.Fatal("the shared sandbox could not be made (see above)")
		}
		test(t, p.s)
	}
}

// sh runs a shell line in the sandbox and fails the test if the guest broke.
func sh(t *testing.T, s sandbox.Sandbox, line string, mod ...func(*guest.ExecRequest)) guest.ExecResult {
	t.Helper()
	req := guest.ExecRequest{Cmd: []string{"/bin/sh", "-c", line}, TimeoutMS: 60_000}
	for _, m := range mod {
		m(&req)
	}
	res, err := s.Guest().Exec(bg, req)
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return res
}

// ok runs a shell line that must succeed and returns its trimmed stdout.
func ok(t *testing.T, s sandbox.Sandbox, line string) string {
	t.Helper()
	res := sh(t, s, line)
	if res.ExitCode != 0 {
		t.Fatalf("%q: exit %d, stderr %q", line, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func timeout(ms int64) func(*guest.ExecRequest) {
	return func(r *guest.ExecRequest) { r.TimeoutMS = ms }
}

func testIdentity(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{}, sandbox.Binding{Env: map[string]string{"CONFORMANCE": "yes"}})
	if uid := ok(t, s, "id -u"); uid == "0" {
		t.Errorf("runs as root")
	}
	status := ok(t, s, "cat /proc/self/status")
	wants := []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1"}
	if d.Capabilities().Isolation == sandbox.IsolationGVisor {
		// gVisor's /proc/PID/status has no NoNewPrivs line; its prctl
		// (PR_GET_NO_NEW_PRIVS) answers 1 under no-new-privileges.
		wants = wants[:2]
	}
	for _, want := range wants {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q", want)
		}
	}
	if v := ok(t, s, "echo $CONFORMANCE"); v != "yes" {
		t.Errorf("spec env not set: %q", v)
	}
	// An init process reaps orphans: PID 1 is not the guest.
	if pid1 := ok(t, s, "cat /proc/1/comm"); pid1 == "agentbox" {
		t.Errorf("the guest is PID 1; want an init process in front of it")
	}
}

func testNoNetwork(t *testing.T, s sandbox.Sandbox) {
	ifaces := ok(t, s, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	if ifaces != "lo" {
		t.Errorf("network interfaces %q, want only lo", ifaces)
	}
	if routes := ok(t, s, "tail -n +2 /proc/net/route"); routes != "" {
		t.Errorf("IPv4 routes exist: %q", routes)
	}
	if routes := ok(t, s, "grep -v ' lo$' /proc/net/ipv6_route || true"); routes != "" {
		t.Errorf("IPv6 routes exist: %q", routes)
	}
}

func testFilesystem(t *testing.T, d sandbox.Driver) {
	ws := t.TempDir()
	s := create(t, d, sandbox.Spec{}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true})
	// /var/tmp is world-writable in the image: only a read-only root
	// keeps the agent from writing there (and, in a VM, from growing the
	// root disk's overlay on the host).
	for _, path := range []string{"/usr/agentbox-test", "/var/tmp/agentbox-test"} {
		if res := sh(t, s, "touch "+path); res.ExitCode == 0 {
			t.Errorf("root filesystem is writable: touch %s succeeded", path)
		}
	}
	ok(t, s, "touch /tmp/x \"$HOME/x\" /workspace/x")
	if fi, err := s.Guest().Stat(bg, "x"); err != nil || fi.Type != "file" {
		t.Errorf("file made by a command not seen by the guest: %+v %v", fi, err)
	}
	// While it runs, a managed workspace may live on a disk of the
	// driver's; once the sandbox is destroyed it is the host directory.
	if err := s.Destroy(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws + "/x"); err != nil {
		t.Errorf("the workspace's file is not in the host directory after destroy: %v", err)
	}
}

func testLimits(t *testing.T, d sandbox.Driver) {
	lim := sandbox.Limits{MemoryBytes: 300 << 20, PidsLimit: 200, NanoCPUs: 5e8}
	s := create(t, d, sandbox.Spec{Limits: lim})
	mem := ok(t, s, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
	if mem != strconv.FormatInt(lim.MemoryBytes, 10) {
		t.Errorf("cgroup memory limit %q, want %d", mem, lim.MemoryBytes)
	}
	pids := ok(t, s, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max")
	if pids != "200" {
		t.Errorf("cgroup pids limit %q, want 200", pids)
	}
	cpu := ok(t, s, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
	if f := strings.Fields(cpu); len(f) != 2 || ratio(f[0], f[1]) != 0.5 {
		t.Errorf("cgroup cpu quota %q, want half a CPU", cpu)
	}
}

func ratio(a, b string) float64 {
	x, _ := strconv.ParseFloat(a, 64)
	y, _ := strconv.ParseFloat(b, 64)
	if y == 0 {
		return 0
	}
	return x / y
}

func testForkBomb(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{PidsLimit: 128}})
	begin := time.Now()
	res := sh(t, s, "bomb() { bomb | bomb & }; bomb; sleep 30", timeout(3000))
	// Either the timeout kills it, or the shell itself cannot fork its sleep
	// once the bomb holds every pid: both are containment. A clean exit is not.
	// A microVM under TCG translates every instruction of the bomb's forks
	// and of their killing, each syscall through the guest's seccomp
	// filter: 10-13 s here on a quiet host, past 20 s with the test suite's
	// other packages running beside it.
	within := 20 * time.Second
	if d.Capabilities().Isolation == sandbox.IsolationMicroVM {
		within = 60 * time.Second
	}
	if !res.TimedOut && res.ExitCode == 0 || time.Since(begin) > within {
		t.Errorf("fork bomb: exit %d, timed out %v, after %v", res.ExitCode, res.TimedOut, time.Since(begin))
	}
	if _, err := s.Guest().Health(bg); err != nil {
		t.Fatalf("guest died under a fork bomb: %v", err)
	}
	// Once the bomb is killed the pids are free again.
	awaitOK(t, s, "echo alive", "alive")
}

func testMemoryHog(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 128 << 20}})
	// dd reads into one 400 MiB buffer (more than the limit, less than
	// a VM of that limit has: its kernel refuses a larger allocation),
	// faulting its pages in as fast as the kernel copies zeros. A pipe
	// through tail, as before, took 26 s to reach the limit under a VM's
	// TCG, and 60 s on a loaded host.
	res := sh(t, s, "dd if=/dev/zero of=/dev/null bs=400M count=1")
	if res.ExitCode != 137 {
		t.Errorf("memory hog: exit %d, want 137 (SIGKILL); stderr %q", res.ExitCode, res.Stderr)
	}
	if !res.OOMKilled {
		t.Errorf("memory hog not reported as OOM-killed: %+v", res)
	}
	if _, err := s.Guest().Health(bg); err != nil {
		t.Fatalf("guest did not survive the OOM kill: %v", err)
	}
	awaitOK(t, s, "echo alive", "alive")
}

func testTimeoutKillsTree(t *testing.T, s sandbox.Sandbox) {
	begin := time.Now()
	res := sh(t, s, "sleep 1000 & sleep 1000 & (sleep 1000 &) ; sleep 1000", timeout(1000))
	if !res.TimedOut {
		t.Errorf("not reported as timed out: %+v", res)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("timeout of 1s returned after %v", d)
	}
	// Count live (non-zombie) sleeps.
	awaitOK(t, s, `n=0; for d in /proc/[0-9]*; do c=$(cat $d/comm 2>/dev/null); st=$(cut -d' ' -f3 $d/stat 2>/dev/null); [ "$c" = sleep ] && [ "$st" != Z ] && n=$((n+1)); done; echo $n`, "0")
}

func testOutputFlood(t *testing.T, s sandbox.Sandbox) {
	res := sh(t, s, "head -c 200000000 /dev/zero")
	if !res.Truncated || res.StdoutBytes != 200000000 || len(res.Stdout) > guest.DefaultMaxOutput+200 {
		t.Errorf("flood: truncated %v, counted %d, kept %d", res.Truncated, res.StdoutBytes, len(res.Stdout))
	}
}

func testBinaryExact(t *testing.T, s sandbox.Sandbox) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>8)
	}
	if _, err := s.Guest().WriteFile(bg, "bin/data", data, 0); err != nil {
		t.Fatal(err)
	}
	res := sh(t, s, "cat bin/data; cat bin/data >&2")
	if string(res.Stdout) != string(data) || string(res.Stderr) != string(data) {
		t.Errorf("binary output differs: %d/%d bytes back of %d", len(res.Stdout), len(res.Stderr), len(data))
	}
	back, err := s.Guest().ReadFile(bg, "bin/data")
	if err != nil || string(back) != string(data) {
		t.Errorf("read back differs: %d bytes, %v", len(back), err)
	}
	if sum := ok(t, s, "cksum < bin/data"); sum != ok(t, s, "cat bin/data | cksum") {
		t.Errorf("checksums differ")
	}
}

func testPathEscapes(t *testing.T, s sandbox.Sandbox) {
	ok(t, s, "ln -s /etc etc-link && ln -s ../../etc/passwd passwd-link")
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "a/../../etc/passwd", "etc-link/passwd", "passwd-link"} {
		if _, err := s.Guest().ReadFile(bg, p); !errors.Is(err, guest.ErrPathEscape) {
			t.Errorf("read %q: %v, want ErrPathEscape", p, err)
		}
		if _, err := s.Guest().WriteFile(bg, p, []byte("x"), 0); !errors.Is(err, guest.ErrPathEscape) {
			t.Errorf("write %q: %v, want ErrPathEscape", p, err)
		}
	}
}

func testRecover(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{Owner: "conformance-owner"})
	ok(t, s, "echo remembered > note")
	r, err := d.Recover(bg, s.Handle())
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if got := ok(t, r, "cat note"); got != "remembered" {
		t.Errorf("recovered sandbox reads %q", got)
	}
	found := false
	hs, err := d.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range hs {
		if h := l.Handle; h.ID == s.Handle().ID {
			found = l.Running && h.JobID == s.Handle().JobID && h.Owner == "conformance-owner"
		}
	}
	if !found {
		t.Errorf("List does not report the running sandbox %s with its job and owner", s.Handle().ID)
	}
}

func testGuestDies(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	// The command's parent is the guest.
	_, err := s.Guest().Exec(ctx, guest.ExecRequest{Cmd: []string{"/bin/sh", "-c", "kill -9 $PPID; sleep 60"}})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("exec whose guest died: err %v, ctx %v; want a prompt error", err, ctx.Err())
	}
	if _, err := d.Recover(bg, s.Handle()); !errors.Is(err, sandbox.ErrGone) {
		awaitGone(t, d, s.Handle())
	}
}

// awaitGone waits until Recover reports the sandbox gone.
func awaitGone(t *testing.T, d sandbox.Driver, h sandbox.Handle) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := d.Recover(bg, h)
		if errors.Is(err, sandbox.ErrGone) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox with a dead guest still recoverable: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testDestroy(t *testing.T, d sandbox.Driver) {
	s, err := sandbox.Start(bg, d, sandbox.Spec{}, sandbox.Binding{JobID: "conformance-destroy"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handle()
	dirs := hostPaths(t, d, h)
	ok(t, s, "mkdir -p deep/er && echo x > deep/er/f")
	for range 2 {
		if err := s.Destroy(bg); err != nil {
			t.Fatalf("destroy: %v", err)
		}
	}
	hs, err := d.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range hs {
		if x.Handle.ID == h.ID {
			t.Errorf("destroyed sandbox %s still listed (running %v)", h.ID, x.Running)
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host directory %s left behind: %v", dir, err)
		}
	}
	if _, err := d.Recover(bg, h); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("recover after destroy: %v, want ErrGone", err)
	}
	if err := d.Remove(bg, h); err != nil {
		t.Errorf("remove after destroy: %v", err)
	}
}

// quotaWatchdog is the QuotaMode of a quota that a watchdog enforces by
// stopping the sandbox, not the kernel by ENOSPC.
const quotaWatchdog = "watchdog"

// testDiskQuota: a write past the disk quota fails inside with ENOSPC and
// does not fill the host's disk, what was written before is intact, the
// space is usable again once freed, and Destroy leaves nothing mounted.
func testDiskQuota(t *testing.T, d sandbox.Driver) {
	if q, is := d.(sandbox.QuotaModer); is && q.QuotaMode("") == quotaWatchdog {
		t.Skipf("this host enforces the %s tier's quota with a watchdog that stops the sandbox (not root, or no loop devices), not with ENOSPC; its own tests check that", d.Capabilities().Isolation)
	}
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}})
	dirs := hostPaths(t, d, s.Handle())
	ok(t, s, "echo small > small.txt")
	res := sh(t, s, "dd if=/dev/zero of=big bs=1M count=200 2>&1; echo exit $?; du -sm . | cut -f1")
	out := string(res.Stdout)
	if !strings.Contains(out, "No space left on device") || strings.Contains(out, "exit 0") {
		t.Fatalf("writing 200 MiB past a 64 MiB quota: %q %q, want ENOSPC", out, res.Stderr)
	}
	lines := strings.Fields(out)
	if mb, err := strconv.Atoi(lines[len(lines)-1]); err != nil || mb > 64 {
		t.Errorf("the workspace holds %q MiB, over its 64 MiB quota", lines[len(lines)-1])
	}
	if got := ok(t, s, "cat small.txt"); got != "small" {
		t.Errorf("the file written before the quota was reached reads %q", got)
	}
	if got := ok(t, s, "rm big && echo again > again.txt && cat again.txt"); got != "again" {
		t.Errorf("after freeing the space: %q", got)
	}
	if err := s.Destroy(bg); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if m := mountsUnder(t, dirs); len(m) > 0 {
		t.Errorf("still mounted after Destroy: %q", m)
	}
}

// mountsUnder are the mount points in /proc/self/mountinfo at or under
// any of dirs.
func mountsUnder(t *testing.T, dirs []string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for _, dir := range dirs {
			if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
				out = append(out, f[4])
			}
		}
	}
	return out
}

// hostPaths is what the sandbox keeps on the host, if the driver says.
func hostPaths(t *testing.T, d sandbox.Driver, h sandbox.Handle) []string {
	t.Helper()
	hp, is := d.(sandbox.HostPather)
	if !is {
		t.Logf("the driver keeps no files on the host (it does not implement sandbox.HostPather)")
		return nil
	}
	dirs, err := hp.HostPaths(h)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("host paths of sandbox %s: %q, %v", h.ID, dirs, err)
	}
	return dirs
}

func testCallerWorkspace(t *testing.T, d sandbox.Driver) {
	for _, managed := range []bool{false, true} {
		ws := t.TempDir()
		os.WriteFile(ws+"/before.txt", []byte("there\n"), 0o644)
		s, err := sandbox.Start(bg, d, sandbox.Spec{}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: managed})
		if err != nil {
			t.Fatal(err)
		}
		if got := ok(t, s, "cat before.txt; echo kept > result.txt"); got != "there" {
			t.Errorf("managed %v: the workspace's file reads %q inside", managed, got)
		}
		if err := s.Destroy(bg); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(ws + "/result.txt"); err != nil || string(b) != "kept\n" {
			t.Errorf("managed %v: caller's workspace lost its file: %q %v", managed, b, err)
		}
	}
}

// awaitOK retries a command until its output is want, for up to 30s.
func awaitOK(t *testing.T, s sandbox.Sandbox, line, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := s.Guest().Exec(bg, guest.ExecRequest{Cmd: []string{"/bin/sh", "-c", line}, TimeoutMS: 10_000})
		if err == nil && res.ExitCode == 0 && strings.TrimSpace(string(res.Stdout)) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never gave %q: last %+v, %v", line, want, res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package microvm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// helperEnv names the guest binary in a helper process that starts a VM
// and is then killed (TestNoOrphanAfterKill9).
const helperEnv = "AGENTBOX_MICROVM_HELPER_GUEST"

// newDriver is a microVM driver whose state is in dir, after the
// assets are made (the kernel, the initramfs, the image's root file
// system: the first build of one takes most of a minute).
func newDriver(t *testing.T, dir string) *microvm.Driver {
	t.Helper()
	testenv.Tool(t, "qemu-system-x86_64", microvm.Install)
	assets(t)
	d, err := microvm.NewDriver(microvm.DriverConfig{StateDir: dir, Image: testenv.Image(), GuestBinary: guestBin,
		Defaults: sandbox.Limits{MemoryBytes: 512 << 20, PidsLimit: 256, NoFile: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Available(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestConformance(t *testing.T) {
	d := newDriver(t, t.TempDir())
	sandboxtest.Run(t, d)
}

// TestGuestKernelAndWorkspace: a command in the VM runs on the guest's
// kernel, not the host's, and what it writes in /workspace is in the
// host directory while the VM runs.
func TestGuestKernelAndWorkspace(t *testing.T) {
	d := newDriver(t, t.TempDir())
	k, _, _ := assets(t)
	ws := t.TempDir()
	ctx := context.Background()
	begin := time.Now()
	s, err := sandbox.Start(ctx, d, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 256 << 20, NanoCPUs: 15e8}}, sandbox.Binding{WorkspaceDir: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	booted := time.Since(begin)
	res, err := s.Guest().Exec(ctx, guest.Shell("uname -r; nproc; echo live > out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := exec.Command("uname", "-r").Output()
	lines := strings.Fields(string(res.Stdout))
	if res.ExitCode != 0 || len(lines) != 2 || lines[0] != k.Release || lines[0] == strings.TrimSpace(string(host)) {
		t.Fatalf("uname -r; nproc in the VM: %q %q, want the guest kernel %s (host %s)", res.Stdout, res.Stderr, k.Release, host)
	}
	if lines[1] != "2" {
		t.Errorf("1.5 CPUs gave %s vCPUs, want 2", lines[1])
	}
	if b, err := os.ReadFile(ws + "/out.txt"); err != nil || string(b) != "live\n" {
		t.Errorf("the guest's file on the host while the VM runs: %q %v", b, err)
	}
	if err := os.WriteFile(ws+"/from-host.txt", []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Guest().ReadFile(ctx, "from-host.txt"); err != nil || string(b) != "hello\n" {
		t.Errorf("the host's file in the guest: %q %v", b, err)
	}
	st := s.(*microvm.Sandbox).State()
	t.Logf("%s, %d MiB, %d vCPUs: create %v; qemu RSS %s", st.Accel, st.MemoryMiB, st.CPUs, booted.Round(time.Millisecond), rss(t, s.(*microvm.Sandbox).PID()))
	unprivileged(t, s.(*microvm.Sandbox).PID(), st.UID)
	noMknod(t, ws)
	// The agent runs as the VM's own uid, named "agent", and what it
	// writes in a shared directory is that uid's on the host: no host
	// account's (the image's agent is uid 1000, a person's on many hosts).
	res, err = s.Guest().Exec(ctx, guest.Shell("id -u; id -un; touch mine"))
	if id := strings.Fields(string(res.Stdout)); err != nil || len(id) != 2 || id[0] != strconv.Itoa(st.UID) || id[1] != "agent" {
		t.Errorf("id in the VM: %q %v, want %d agent", res.Stdout, err, st.UID)
	}
	if fi, err := os.Lstat(ws + "/mine"); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(st.UID) {
		t.Errorf("a file the agent made is owned on the host by %v (%v), want the VM's uid %d", fi.Sys(), err, st.UID)
	}
	if _, err := d.Create(ctx, sandbox.Spec{Network: "bridge"}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("network bridge: %v, want ErrInvalidSpec", err)
	}
}

// TestNoOrphanAfterKill9: a process that started a VM is killed with
// SIGKILL; its QEMU dies with it, Recover says gone, and List and Remove
// clean the state it left.
func TestNoOrphanAfterKill9(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper")
	}
	dir := t.TempDir()
	d := newDriver(t, dir)
	cmd, out := startHelper(t, dir)
	defer cmd.Process.Kill()
	pid := readPID(t, out)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("qemu %d not running: %v", pid, err)
	}
	ls, err := d.List(context.Background())
	if err != nil || len(ls) != 1 || !ls[0].Running {
		t.Fatalf("List while the helper runs: %+v %v, want one running", ls, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("qemu %d outlived the process that started it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	awaitNoProcess(t, dir)
	if _, err := d.Recover(context.Background(), ls[0].Handle); !errors.Is(err, sandbox.ErrGone) {
		t.Errorf("recover after the starter died: %v, want ErrGone", err)
	}
	if ls, _ := d.List(context.Background()); len(ls) != 1 || ls[0].Running {
		t.Errorf("List after the kill: %+v, want one not running", ls)
	}
	if err := d.Remove(context.Background(), ls[0].Handle); err != nil {
		t.Fatal(err)
	}
	if ls, _ := d.List(context.Background()); len(ls) != 0 {
		t.Errorf("List after Remove: %+v", ls)
	}
}

// readPID reads the "qemu PID" line the helper prints.
func readPID(t *testing.T, out interface{ Read([]byte) (int, error) }) int {
	t.Helper()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "qemu "); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("the helper printed no qemu pid: %v", sc.Err())
	return 0
}

// TestOrphanHelper is the helper process: it starts a VM, prints QEMU's
// pid and waits to be killed.
func TestOrphanHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("only as TestNoOrphanAfterKill9's helper")
	}
	d, err := microvm.NewDriver(microvm.DriverConfig{StateDir: os.Getenv("AGENTBOX_MICROVM_HELPER_DIR"),
		Image: testenv.Image(), GuestBinary: guestBin})
	if err != nil {
		t.Fatal(err)
	}
	spec, b := sandbox.Spec{}, sandbox.Binding{}
	if ws := os.Getenv(helperWorkspaceEnv); ws != "" {
		spec = sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}
		b = sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true}
	}
	s, err := sandbox.Start(context.Background(), d, spec, b)
	if err != nil {
		t.Fatal(err)
	}
	if b.WorkspaceDir != "" {
		writeInside(t, s)
	}
	fmt.Printf("qemu %d\n", s.(*microvm.Sandbox).PID())
	time.Sleep(5 * time.Minute)
}

// startHelper starts TestOrphanHelper in a process of its own, making a
// VM with its state in dir, and returns it with its standard output,
// where it prints QEMU's pid.
func startHelper(t *testing.T, dir string, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanHelper$", "-test.v")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+guestBin, "AGENTBOX_MICROVM_HELPER_DIR="+dir), env...)
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// awaitNoProcess waits until no process's command line names dir (QEMU's
// and virtiofsd's do), for up to 10 s.
func awaitNoProcess(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesNaming(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived the one that started the VM: %q", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processesNaming(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// helperWorkspaceEnv names the job workspace TestOrphanHelper's VM gets.
const helperWorkspaceEnv = "AGENTBOX_MICROVM_HELPER_WS"

// insideScript is what a sandbox writes in its workspace before its QEMU
// is killed: a result, and what an attacker plants for the copy back (a
// link to a host file, a hard link, a FIFO, a set-user-ID file).
const insideScript = "echo inside > result.txt && mkdir -p d && echo hi > d/x && ln d/x hard && " +
	"ln -s /etc/shadow link && mkfifo fifo && echo s > suid && chmod u+s suid && echo done"

// writeInside runs insideScript in s.
func writeInside(t *testing.T, s sandbox.Sandbox) {
	t.Helper()
	res, err := s.Guest().Exec(context.Background(), guest.Shell(insideScript))
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "done" {
		t.Fatalf("writing in the workspace: %q %q %v", res.Stdout, res.Stderr, err)
	}
}

// TestWorkspaceSurvivesKilledVM: a job's workspace lives on a loop disk
// while its VM runs. When the VM dies without Destroy (its QEMU killed, or
// the server killed -9 with it), Remove through a fresh Driver copies the
// disk's content back to the workspace, links as links and owned by the
// workspace's owner, and leaves nothing mounted: the job restarts on it.
func TestWorkspaceSurvivesKilledVM(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in the helper")
	}
	for _, tc := range []struct {
		name string
		kill func(t *testing.T, dir, ws string) sandbox.Handle
	}{
		{"qemu killed", killQEMUInProcess},
		{"server killed -9", killServerProcess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ws := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(ws, "before.txt"), []byte("before\n"), 0o644)
			if err := os.Chown(ws, 4242, 4243); err != nil {
				t.Fatal(err)
			}
			h := tc.kill(t, dir, ws)
			if _, err := os.Lstat(filepath.Join(ws, "result.txt")); err == nil {
				t.Fatal("the VM wrote the workspace directory itself, not its loop disk")
			}
			d := newDriver(t, dir) // a fresh one, as after a restart
			begin := time.Now()
			if err := d.Remove(context.Background(), h); err != nil {
				t.Fatalf("remove: %v", err)
			}
			t.Logf("remove (copy back, unmount) %v", time.Since(begin).Round(time.Millisecond))
			checkCopiedBack(t, ws)
			if m := mountsUnder(t, dir); len(m) > 0 {
				t.Errorf("still mounted after Remove: %q", m)
			}
			if ls, _ := d.List(context.Background()); len(ls) != 0 {
				t.Errorf("List after Remove: %+v", ls)
			}
		})
	}
}

// killQEMUInProcess makes a sandbox on ws, writes in it and kills its QEMU.
func killQEMUInProcess(t *testing.T, dir, ws string) sandbox.Handle {
	d := newDriver(t, dir)
	begin := time.Now()
	s, err := sandbox.Start(context.Background(), d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create with a 64 MiB loop disk %v", time.Since(begin).Round(time.Millisecond))
	writeInside(t, s)
	pid := s.(*microvm.Sandbox).PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return s.Handle()
}

// killServerProcess has a helper process make a sandbox on ws and write
// in it, then kills the helper with SIGKILL (its QEMU and virtiofsd die
// with it) and returns the handle List finds.
func killServerProcess(t *testing.T, dir, ws string) sandbox.Handle {
	newDriver(t, dir) // the assets, before the helper needs them
	cmd, out := startHelper(t, dir, helperWorkspaceEnv+"="+ws)
	defer cmd.Process.Kill()
	readPID(t, out)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	awaitNoProcess(t, dir)
	ls, err := newDriver(t, dir).List(context.Background())
	if err != nil || len(ls) != 1 || ls[0].Running {
		t.Fatalf("List after the kill: %+v %v, want one not running", ls, err)
	}
	return ls[0].Handle
}

// checkCopiedBack checks that ws holds what insideScript wrote, copied
// back as the copy back must: no link followed, no set-ID bit, the hard
// link kept, the FIFO a FIFO, everything owned by ws's owner.
func checkCopiedBack(t *testing.T, ws string) {
	t.Helper()
	for name, want := range map[string]string{"before.txt": "before\n", "result.txt": "inside\n", "d/x": "hi\n", "hard": "hi\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s after Remove: %q %v, want %q", name, b, err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "/etc/shadow" {
		t.Errorf("link after Remove: %q %v, want a link to /etc/shadow", target, err)
	}
	checkModes(t, ws)
	_ = filepath.WalkDir(ws, func(p string, _ os.DirEntry, err error) error {
		if fi, lerr := os.Lstat(p); err == nil && lerr == nil {
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4243 {
				t.Errorf("%s is owned by %d:%d, want the workspace's owner 4242:4243", p, st.Uid, st.Gid)
			}
		}
		return nil
	})
}

// checkModes checks the FIFO, the set-user-ID file and the hard link.
func checkModes(t *testing.T, ws string) {
	t.Helper()
	if fi, err := os.Lstat(filepath.Join(ws, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo after Remove: %v %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid after Remove: %v %v, want no set-user-ID bit", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "hard")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Errorf("hard link after Remove: %v %v, want two links", fi, err)
	}
}

// mountsUnder are the mount points in /proc/self/mountinfo under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// TestDiskQuotaWatchdog: a directory a caller brought is shared as it is,
// under a watchdog: a VM writing past its quota there is killed, says why,
// and leaves the directory near its quota, given back to its owner.
func TestDiskQuotaWatchdog(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ws := t.TempDir()
	if err := os.Chown(ws, 4242, 4243); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := sandbox.Start(ctx, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	begin := time.Now()
	req := guest.Shell("for i in $(seq 100); do dd if=/dev/zero of=f$i bs=1M count=20 2>/dev/null; done")
	req.TimeoutMS = 120_000
	if _, err := s.Guest().Exec(ctx, req); err == nil {
		t.Fatal("2 GB written past a 64 MiB quota and the VM still runs")
	}
	why := s.(sandbox.Stopper).Stopped()
	if !errors.Is(why, sandbox.ErrDiskQuota) {
		t.Fatalf("stopped: %v, want ErrDiskQuota", why)
	}
	held := dirBytes(ws)
	t.Logf("stopped after %v holding %d MiB: %v", time.Since(begin).Round(time.Millisecond), held>>20, why)
	if held > 64<<20+64<<20 {
		t.Errorf("the workspace holds %d MiB, far past its 64 MiB quota", held>>20)
	}
	if err := s.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "f1"), &st); err != nil || st.Uid != 4242 {
		t.Errorf("f1 after Destroy: uid %d %v, want the workspace's owner 4242", st.Uid, err)
	}
}

// dirBytes is the disk space the files under dir take.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if fi, ierr := e.Info(); err == nil && ierr == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

// TestConsoleLogBounded: code in the VM makes the guest kernel write to
// the console (each OOM kill of its cgroup prints a report), which QEMU
// logs on the host; the log stops at its limit, saying so, however much
// more the guest writes.
func TestConsoleLogBounded(t *testing.T) {
	testenv.Tool(t, "qemu-system-x86_64", microvm.Install)
	assets(t)
	const limit = 512
	d, err := microvm.NewDriver(microvm.DriverConfig{StateDir: t.TempDir(), Image: testenv.Image(), GuestBinary: guestBin,
		Defaults: sandbox.Limits{MemoryBytes: 64 << 20, PidsLimit: 256, NoFile: 4096}, ConsoleLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := d.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	log := filepath.Join(s.(*microvm.Sandbox).State().StateDir, "console.log")
	hog := guest.Shell(`for i in 1 2 3 4; do python3 -c 'b = bytearray(128 << 20)'; done; echo done`)
	hog.TimeoutMS = 120_000
	res, err := s.Guest().Exec(ctx, hog)
	if err != nil || !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("the memory hogs: %+v %v", res, err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	const note = "console log cut here"
	if !strings.Contains(string(b), note) || len(b) > limit+200 {
		t.Fatalf("console.log holds %d bytes (limit %d), note %v; the guest's OOM reports were not capped:\n%s",
			len(b), limit, strings.Contains(string(b), note), b[max(0, len(b)-500):])
	}
	if !strings.Contains(string(b), "out of memory") && !strings.Contains(string(b), "oom") {
		t.Errorf("the log holds no OOM report: the guest wrote something else\n%s", b)
	}
	if _, err := s.Guest().Exec(ctx, guest.Shell("true")); err != nil {
		t.Errorf("the guest after its console filled: %v", err)
	}
}

// unprivileged checks that QEMU (pid) runs as uid, a sandbox uid and not
// root, with no capabilities, under QEMU's seccomp filter (-sandbox on).
func unprivileged(t *testing.T, pid, uid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	u := strconv.Itoa(uid)
	wants := []string{"Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\n", "Gid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\n",
		"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"}
	if uid < 200000 {
		t.Errorf("QEMU's uid %d is not of the sandbox range", uid)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if g, ok := strings.CutPrefix(l, "Groups:"); ok && strings.TrimSpace(g) != "" {
			t.Errorf("QEMU keeps supplementary groups %q", g)
		}
	}
	for _, w := range wants {
		if !strings.Contains(string(b), w) {
			t.Errorf("QEMU's /proc/%d/status lacks %q:\n%s", pid, w, b)
		}
	}
}

// noMknod checks that the virtiofsd processes sharing dir hold neither
// CAP_MKNOD nor CAP_SETFCAP: even a guest kernel taken over makes no
// device node in a live host directory.
func noMknod(t *testing.T, dir string) {
	t.Helper()
	pids := testenv.ProcessesNaming(dir, "virtiofsd")
	if len(pids) == 0 {
		t.Fatalf("no virtiofsd shares %s", dir)
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // ended meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
				caps, _ := strconv.ParseUint(v, 16, 64)
				if caps&(1<<27|1<<31) != 0 {
					t.Errorf("virtiofsd %d has CAP_MKNOD or CAP_SETFCAP: CapEff %s", pid, v)
				}
			}
		}
	}
}

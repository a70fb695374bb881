package microvm_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	s, err := d.Create(ctx, sandbox.Spec{WorkspaceDir: ws, Limits: sandbox.Limits{MemoryBytes: 256 << 20, NanoCPUs: 15e8}})
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+guestBin, "AGENTBOX_MICROVM_HELPER_DIR="+dir)
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	s, err := d.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("qemu %d\n", s.(*microvm.Sandbox).PID())
	time.Sleep(5 * time.Minute)
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

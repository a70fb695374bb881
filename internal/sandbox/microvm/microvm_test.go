package microvm_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/testenv"
)

var guestBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv(helperEnv); bin != "" {
		guestBin = bin // a helper process of TestNoOrphanAfterKill9
		os.Exit(m.Run())
	}
	testenv.MainWithGuest(mainRunner{m}, &guestBin)
}

// mainRunner runs the tests, then destroys the VM some of them shared
// (t.Cleanup cannot outlive one test).
type mainRunner struct{ m *testing.M }

func (r mainRunner) Run() int {
	code := r.m.Run()
	destroyPlainVM()
	return code
}

// assets returns the kernel, the initramfs and the sandbox image's root
// file system, built (or found in the cache) for this test.
func assets(t *testing.T) (microvm.Kernel, string, string) {
	t.Helper()
	ctx := context.Background()
	k, err := microvm.FetchKernel(ctx, microvm.DefaultCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := microvm.BuildInitramfs(k, guestBin, microvm.DefaultCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := microvm.BuildInitramfs(k, guestBin, microvm.DefaultCacheDir)
	if err != nil || again != initrd {
		t.Fatalf("initramfs not reused: %s then %s, %v", initrd, again, err)
	}
	testenv.DockerWithImage(t)
	start := time.Now()
	rootfs, err := microvm.BuildRootfs(ctx, testenv.Image(), microvm.DefaultCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s, initramfs %s, rootfs %s (%v)", k.Release, filepath.Base(initrd), filepath.Base(rootfs), time.Since(start).Round(time.Millisecond))
	return k, initrd, rootfs
}

func TestBootExecShutdown(t *testing.T) {
	qemu := testenv.Tool(t, "qemu-system-x86_64", "apt-get install qemu-system-x86")
	k, initrd, rootfs := assets(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	accel, why := microvm.ChooseAccel(ctx, qemu, k.Image)
	t.Logf("accelerator %s %s", accel, why)
	dir := t.TempDir()
	start := time.Now()
	vm, err := microvm.Start(ctx, microvm.Config{QEMU: qemu, Kernel: k.Image, Initramfs: initrd, Rootfs: rootfs,
		MemoryMiB: memMiB(), CPUs: 1, Machine: os.Getenv("AGENTBOX_MICROVM_MACHINE"), Accel: accel, Dir: dir, Stderr: t.Output()})
	if err != nil {
		console(t, dir)
		t.Fatal(err)
	}
	pid := vm.PID()
	defer func() {
		if syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	booted := time.Since(start)
	res, err := vm.Guest().Exec(ctx, guest.Shell("uname -r; id -u; cat /proc/cmdline"))
	if err != nil {
		console(t, dir)
		t.Fatal(err)
	}
	first := time.Since(start)
	lines := strings.Split(string(res.Stdout), "\n")
	if res.ExitCode != 0 || lines[0] != k.Release || lines[1] != "1000" {
		t.Fatalf("uname -r; id -u in the VM: %q %q exit %d, want %s and 1000", res.Stdout, res.Stderr, res.ExitCode, k.Release)
	}
	t.Logf("%s %s: boot to guest answering %v, to first exec done %v", accel, os.Getenv("AGENTBOX_MICROVM_MACHINE"), booted.Round(time.Millisecond), first.Round(time.Millisecond))
	t.Logf("exec round trip (true) median %v", execRoundTrip(ctx, t, vm.Guest()))
	t.Logf("qemu RSS idle: %s", rss(t, pid))
	closeStart := time.Now()
	if err := vm.Close(ctx, 10*time.Second); err != nil {
		console(t, dir)
		t.Fatal(err)
	}
	t.Logf("shutdown %v", time.Since(closeStart).Round(time.Millisecond))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("qemu %d still there after Close: %v", pid, err)
	}
}

func execRoundTrip(ctx context.Context, t *testing.T, c *guest.Client) time.Duration {
	var ds []time.Duration
	for range 10 {
		s := time.Now()
		if _, err := c.Exec(ctx, guest.ExecRequest{Cmd: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(s))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2].Round(time.Microsecond)
}

// rss is QEMU's resident set size, from /proc.
func rss(t *testing.T, pid int) string {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
			return strings.TrimSpace(string(v))
		}
	}
	return "?"
}

func itoa(n int) string { return strconv.Itoa(n) }

// console prints the VM's console log, for a failure.
func console(t *testing.T, dir string) {
	b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
	t.Logf("console:\n%s", b)
}

// memMiB is the VM's memory: AGENTBOX_MICROVM_MEMORY_MIB or 512.
func memMiB() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTBOX_MICROVM_MEMORY_MIB")); err == nil {
		return n
	}
	return 512
}

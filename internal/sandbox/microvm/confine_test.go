package microvm_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// guestProbe calls syscalls through ctypes and prints one line for each:
// its name, then "ok" or the errno it failed with (x86_64's numbers).
const guestProbe = `
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
none = ctypes.c_long(-1)
for name, (nr, *args) in {
    "io_uring_setup": (425, 1, buf),
    "io_uring_enter": (426, none, 0, 0, 0, None, 0),
    "keyctl": (250, 0, none, 0),
    "bpf": (321, 0, buf, 16),
    "perf_event_open": (298, buf, 0, none, none, 0),
    "unshare": (272, 0x10000000),
    "getpid": (39,),
}.items():
    r = libc.syscall(nr, *args)
    print(name, "ok" if r != -1 else errno.errorcode[ctypes.get_errno()])
`

// manyOpen creates 4,000 files in the workspace and holds them all open
// at once, as npm install and git checkouts do with many more.
const manyOpen = `
import os
os.makedirs("many", exist_ok=True)
held = []
for i in range(4000):
    f = open("many/%d" % i, "w")
    f.write(str(i))
    f.flush()
    held.append(f)
print(len(held))
`

// TestGuestConfined: the agent in a VM is held as in a container. The
// container tier's seccomp profile applies (io_uring and the other removed
// syscalls fail), no user namespace can be made (unshare -Urnm gave root
// in one, and mounts), and 4,000 files of the workspace can be held open
// although this process's soft open-files limit is 1024, as under
// systemd's and Docker's defaults (virtiofsd inherited it and the guest
// failed after about a thousand files). One VM for all of it.
func TestGuestConfined(t *testing.T) {
	lowerNoFile(t, 1024)
	d := newDriver(t, t.TempDir())
	ctx := context.Background()
	s, err := d.Create(ctx, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	run := func(req guest.ExecRequest) guest.ExecResult {
		t.Helper()
		req.TimeoutMS = 120_000
		res, err := s.Guest().Exec(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("seccomp", func(t *testing.T) {
		if res := run(guest.Shell("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")); !strings.Contains(string(res.Stdout), "Seccomp:\t2") {
			t.Errorf("a command's status: %q, want Seccomp 2 (a filter)", res.Stdout)
		}
		res := run(guest.ExecRequest{Cmd: []string{"python3", "-c", guestProbe}})
		got := map[string]string{}
		for line := range strings.Lines(string(res.Stdout)) {
			name, result, _ := strings.Cut(strings.TrimSpace(line), " ")
			got[name] = result
		}
		for name, want := range map[string]string{"io_uring_setup": "EPERM", "io_uring_enter": "EPERM", "keyctl": "EPERM",
			"bpf": "EPERM", "perf_event_open": "EPERM", "unshare": "EPERM", "getpid": "ok"} {
			if got[name] != want {
				t.Errorf("%s: %q, want %s (probe exit %d, stderr %q)", name, got[name], want, res.ExitCode, res.Stderr)
			}
		}
	})
	t.Run("no user namespaces", func(t *testing.T) {
		if res := run(guest.Shell("unshare -Urnm id -u")); res.ExitCode == 0 {
			t.Errorf("unshare -Urnm: %q, a user namespace was made", res.Stdout)
		}
		if res := run(guest.Shell("cat /proc/sys/user/max_user_namespaces")); strings.TrimSpace(string(res.Stdout)) != "0" {
			t.Errorf("max_user_namespaces in the guest: %q, want 0", res.Stdout)
		}
	})
	t.Run("4000 files open", func(t *testing.T) {
		begin := time.Now()
		res := run(guest.ExecRequest{Cmd: []string{"python3", "-c", manyOpen}})
		if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "4000" {
			t.Fatalf("holding 4000 workspace files open: exit %d, %q, stderr %.500q", res.ExitCode, res.Stdout, res.Stderr)
		}
		t.Logf("4000 files created and held open in %v", time.Since(begin).Round(time.Millisecond))
	})
}

// lowerNoFile sets this process's soft open-files limit to n for the
// test: the children it starts (virtiofsd) inherit it.
func lowerNoFile(t *testing.T, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := syscall.Rlimit{Cur: min(n, old.Max), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

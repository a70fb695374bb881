package docker_test

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

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Attacks from inside a real sandbox on the host's shared resources: the
// file table, the disk, the uid space. Each fails if its bound is removed.

func create(t *testing.T, d *docker.Driver, spec sandbox.Spec, bind ...sandbox.Binding) sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.Start(context.Background(), d, spec, bindingOf(bind))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	return s
}

// bindingOf is the binding a test helper was given, if any.
func bindingOf(bind []sandbox.Binding) sandbox.Binding {
	if len(bind) == 0 {
		return sandbox.Binding{}
	}
	return bind[0]
}

func sh(t *testing.T, s sandbox.Sandbox, script string) guest.ExecResult {
	t.Helper()
	req := guest.Shell(script)
	req.TimeoutMS = 120_000
	res, err := s.Guest().Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// fdFlood starts procs processes that each open as many files as they can
// (up to want), report how many they got, and hold them until killed.
const fdFlood = `
import os, sys, time
procs, want = int(sys.argv[1]), int(sys.argv[2])
for i in range(procs):
    if os.fork() == 0:
        out = os.open("/tmp/fd-%d.part" % i, os.O_WRONLY | os.O_CREAT)
        fds = []
        try:
            for _ in range(want):
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        os.write(out, str(len(fds)).encode())
        os.rename("/tmp/fd-%d.part" % i, "/tmp/fd-%d" % i)
        time.sleep(600)
        os._exit(0)
done = lambda: [n for n in os.listdir("/tmp") if n.startswith("fd-") and not n.endswith(".part")]
while len(done()) < procs:
    time.sleep(0.05)
print(max(int(open("/tmp/" + n).read()) for n in done()))
`

func TestOpenFilesFloodIsBounded(t *testing.T) {
	d := newDriver(t)
	a := create(t, d, sandbox.Spec{})
	if res := sh(t, a, "ulimit -n; ulimit -Hn"); string(res.Stdout) != "1024\n1024\n" {
		t.Fatalf("ulimit -n -Hn = %q, want 1024 twice", res.Stdout)
	}
	before := filesInUse(t)
	// 100 processes each asking for 20,000 files: 2,000,000 without the
	// bound, most of this host's fs.file-max.
	res := sh(t, a, "cat > /tmp/flood.py <<'EOF'\n"+fdFlood+"EOF\npython3 /tmp/flood.py 100 20000")
	got, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil || got > 1024 || got < 900 {
		t.Fatalf("a process opened %q files (stderr %q), want at most 1024", res.Stdout, res.Stderr)
	}
	during := filesInUse(t)
	if grew := during - before; grew > 100*1024+20_000 {
		t.Errorf("the host's open files grew by %d during the flood, more than 100 processes × 1024", grew)
	}
	// While the flood holds its files, another sandbox starts and works.
	b := create(t, d, sandbox.Spec{})
	if res := sh(t, b, "echo ok"); string(res.Stdout) != "ok\n" {
		t.Fatalf("second sandbox: %+v", res)
	}
}

// filesInUse is the host's allocated file handles (the first field of
// fs.file-nr).
func filesInUse(t *testing.T) int {
	t.Helper()
	n := fileNr()
	if n < 0 {
		t.Fatal("cannot read fs.file-nr")
	}
	return n
}

// fileNr is the first field of fs.file-nr, or -1; safe off the test's
// goroutine.
func fileNr() int {
	b, err := os.ReadFile("/proc/sys/fs/file-nr")
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(strings.Fields(string(b))[0])
	return n
}

func TestSandboxUIDIsNoHostAccount(t *testing.T) {
	d := newDriver(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "mine"), []byte("x"), 0o600)
	before, _ := os.Stat(ws)
	a := create(t, d, sandbox.Spec{}, sandbox.Binding{WorkspaceDir: ws})
	b := create(t, d, sandbox.Spec{})
	uidA, uidB := stateOf(t, a).UID, stateOf(t, b).UID
	if uidA == uidB || uidA < 200000 || uidA > 299999 || uidB < 200000 || uidB > 299999 {
		t.Fatalf("uids %d and %d: want two distinct uids of 200000-299999", uidA, uidB)
	}
	if names := hostAccounts(t, uidA, uidB); len(names) > 0 {
		t.Fatalf("host accounts with the sandboxes' uids: %v", names)
	}
	res := sh(t, a, "id -u; whoami; echo $HOME; cat mine; touch made; git init -q g && cd g && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && echo committed; chmod 777 .. ../made")
	want := fmt.Sprintf("%d\nagent\n/home/agent\nxcommitted\n", uidA)
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Fatalf("inside: %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	if owner(t, filepath.Join(ws, "made")) != uidA {
		t.Errorf("a file the sandbox made is not owned by its uid %d", uidA)
	}
	a.Destroy(context.Background())
	// The caller's workspace, and what the sandbox left in it, are given
	// back to its owner.
	after, _ := os.Stat(ws)
	if !sameOwner(before, after) || owner(t, filepath.Join(ws, "made")) != int(before.Sys().(*syscall.Stat_t).Uid) {
		t.Errorf("workspace not handed back to its owner")
	}
	// Nor left writable by any local user, as the sandbox made it.
	for _, p := range []string{ws, filepath.Join(ws, "made")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s handed back writable by others: %v", p, fi.Mode())
		}
	}
}

func hostAccounts(t *testing.T, uids ...int) []string {
	t.Helper()
	f, err := os.Open("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		for _, uid := range uids {
			if len(fields) > 2 && fields[2] == strconv.Itoa(uid) {
				out = append(out, fields[0])
			}
		}
	}
	return out
}

func owner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

func TestSocketDirIsLocked(t *testing.T) {
	s := create(t, newDriver(t), sandbox.Spec{})
	res := sh(t, s, "rm -f /run/agentbox/"+guest.SocketName+" 2>&1; ln -s /var/run/docker.sock /run/agentbox/x 2>&1; dd if=/dev/zero of=/run/agentbox/fill bs=1M count=1 2>&1; ls /run/agentbox")
	out := string(res.Stdout)
	if !strings.Contains(out, "Permission denied") || !strings.HasSuffix(out, "\n"+guest.SocketName+"\n") {
		t.Fatalf("the sandbox changed its socket directory: %q", out)
	}
	if _, err := s.Guest().Health(context.Background()); err != nil {
		t.Fatalf("guest no longer answers: %v", err)
	}
}

func requireLoopDisks(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testenv.DockerRequired() {
			t.Fatal("the loop-disk quota needs root (CI runs as root)")
		}
		t.Skip("skipping: the loop-disk quota needs root")
	}
}

func TestDiskQuotaIsENOSPC(t *testing.T) {
	requireLoopDisks(t)
	d := newDriver(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "before"), []byte("kept"), 0o644)
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true})
	res := sh(t, s, "echo $(cat before); for i in 1 2 3; do dd if=/dev/zero of=f$i bs=1M count=40 2>&1 | grep -o 'No space left on device'; done; du -sm . | cut -f1; echo small > small")
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) < 3 || lines[0] != "kept" || lines[1] != "No space left on device" {
		t.Fatalf("writing past a 64 MiB quota: %q (stderr %q), want ENOSPC", res.Stdout, res.Stderr)
	}
	if mb, _ := strconv.Atoi(lines[len(lines)-1]); mb > 64 {
		t.Errorf("the workspace holds %d MiB, over its 64 MiB quota", mb)
	}
	// The tools are told: the error is the kernel's, in the output.
	sh(t, s, "rm f2 f3; mkdir -p d/e; echo hi > d/e/x; ln -s d/e/x link; ln d/e/x hard; truncate -s 60M sparse")
	s.Destroy(context.Background())
	for name, want := range map[string]string{"before": "kept", "d/e/x": "hi\n", "link": "hi\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s after destroy: %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link not copied back as a link: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "sparse"), &st); err != nil || st.Size != 60<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse file copied back with %d bytes allocated (err %v), want its holes kept", st.Blocks*512, err)
	}
	if m := loopMounts(t, d.StateDir()); len(m) > 0 {
		t.Errorf("loop disks still mounted: %v", m)
	}
	assertNoLeak(t, d)
}

func loopMounts(t *testing.T, under string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], under) {
			out = append(out, f[1])
		}
	}
	return out
}

func TestDiskQuotaWatchdog(t *testing.T) {
	d := newDriver(t, func(c *docker.Config) { c.Quota = docker.QuotaWatch })
	ws := t.TempDir()
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: ws})
	// One file cannot pass the quota (RLIMIT_FSIZE): it stops 1 MiB short,
	// which leaves room for the directory the watchdog also charges, so
	// the sandbox is not stopped for it.
	res := sh(t, s, "trap '' XFSZ; dd if=/dev/zero of=one bs=1M count=100 2>&1 | grep -c 'File too large'; stat -c %s one")
	if string(res.Stdout) != "1\n66060288\n" {
		t.Fatalf("one big file: %q (stderr %q), want EFBIG at 63 MiB", res.Stdout, res.Stderr)
	}
	sh(t, s, "rm one")
	// Many files can, until the watchdog stops the sandbox.
	begin := time.Now()
	req := guest.Shell("for i in $(seq 100); do dd if=/dev/zero of=f$i bs=1M count=20 2>/dev/null; done")
	req.TimeoutMS = 60_000
	_, err := s.Guest().Exec(context.Background(), req)
	if err == nil {
		t.Fatal("2 GB written past a 64 MiB quota and the sandbox still runs")
	}
	why := s.(sandbox.Stopper).Stopped()
	if !errors.Is(why, sandbox.ErrDiskQuota) {
		t.Fatalf("stopped: %v (exec: %v), want ErrDiskQuota", why, err)
	}
	held := dirSize(t, ws)
	t.Logf("stopped after %v holding %d MiB: %v", time.Since(begin).Round(time.Millisecond), held>>20, why)
	if held > 64<<20+512<<20 {
		t.Errorf("the workspace holds %d MiB, far past its 64 MiB quota", held>>20)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

func TestFreeSpaceFloor(t *testing.T) {
	d := newDriver(t, func(c *docker.Config) { c.MinFreeBytes = 1 << 60 })
	_, err := d.Create(context.Background(), sandbox.Spec{})
	if !errors.Is(err, sandbox.ErrNoSpace) || !strings.Contains(err.Error(), "AGENTBOX_MIN_FREE_DISK") {
		t.Fatalf("err = %v, want ErrNoSpace naming AGENTBOX_MIN_FREE_DISK", err)
	}
	assertNoLeak(t, d)
}

// TestCopyBackKeepsWhatItCan: a path too long for the host's tools must not
// cost the job its workspace nor leave the disk behind; and the note saying
// so must not follow a link the sandbox put at its name to a host file.
func TestCopyBackKeepsWhatItCan(t *testing.T) {
	requireLoopDisks(t)
	d := newDriver(t)
	ws := t.TempDir()
	hostFile := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(hostFile, []byte("the host's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: true})
	// 22 directories of 200-byte names: a path of 4,422 bytes, over PATH_MAX.
	res := sh(t, s, "echo important > result.txt; chmod u+s result.txt; mkdir .agentbox; ln -s "+hostFile+" .agentbox/copy-errors.txt; "+
		"d=$(printf 'd%.0s' $(seq 200)); "+
		"for i in $(seq 22); do mkdir $d && cd $d || exit 1; done; echo deep > f && echo made")
	if strings.TrimSpace(string(res.Stdout)) != "made" {
		t.Fatalf("setup: %q %q", res.Stdout, res.Stderr)
	}
	stateDir := stateOf(t, s).StateDir
	err := s.Destroy(context.Background())
	if err == nil {
		t.Error("destroy said nothing of what it could not copy back")
	}
	if b, rerr := os.ReadFile(filepath.Join(ws, "result.txt")); rerr != nil || string(b) != "important\n" {
		t.Errorf("result.txt after destroy: %q, %v (destroy: %v)", b, rerr, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "result.txt")); err == nil && fi.Mode()&os.ModeSetuid != 0 {
		t.Error("a set-uid bit reached the host")
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".agentbox/copy-errors.txt")); err != nil || !strings.Contains(string(b), "copy workspace back") {
		t.Errorf("copy-errors.txt: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, ".agentbox/copy-errors.txt")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("copy-errors.txt is not a file of its own: %v %v", fi, err)
	}
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "the host's own\n" {
		t.Errorf("the host file the sandbox linked at the note's name now holds %q (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "disk.img")); !os.IsNotExist(err) {
		t.Errorf("the disk image was left behind: %v", err)
	}
	if m := loopMounts(t, d.StateDir()); len(m) > 0 {
		t.Errorf("loop disks still mounted: %v", m)
	}
	assertNoLeak(t, d)
}

// mmapFlood starts procs processes that each map a file and close its
// descriptor as often as they can (up to vm.max_map_count), which holds
// the file open in the host's file table past RLIMIT_NOFILE.
const mmapFlood = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open("/workspace/f", os.O_RDWR | os.O_CREAT); os.write(fd, b"x" * 4096); os.close(fd)
for k in range(int(sys.argv[1])):
    if os.fork() == 0:
        for i in range(65000):
            fd = os.open("/workspace/f", os.O_RDONLY)
            p = libc.mmap(None, 4096, 1, 1, fd, 0)
            os.close(fd)
            if p in (None, ctypes.c_void_p(-1).value):
                break
        time.sleep(600)
        os._exit(0)
time.sleep(600)
`

// TestMappedFilesAreBoundedByMemory: past RLIMIT_NOFILE, a sandbox can
// hold files open by mapping them; each costs kernel memory charged to the
// sandbox, so its memory limit bounds them (config.FileBytes per file),
// which is what the server sizes fs.file-max by.
func TestMappedFilesAreBoundedByMemory(t *testing.T) {
	d := newDriver(t)
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 128 << 20}})
	before := filesInUse(t)
	peak := make(chan int)
	stop := make(chan struct{})
	go func() {
		p := 0
		for {
			select {
			case <-stop:
				peak <- p
				return
			case <-time.After(20 * time.Millisecond):
				p = max(p, fileNr()-before)
			}
		}
	}()
	// 8 processes could map 520,000 files: far more than 128 MiB allows.
	req := guest.Shell("cat > /tmp/flood.py <<'EOF'\n" + mmapFlood + "EOF\ntimeout 60 python3 /tmp/flood.py 8")
	req.TimeoutMS = 90_000
	res, err := s.Guest().Exec(context.Background(), req)
	close(stop)
	grew := <-peak
	t.Logf("the flood ended with exit %d (%v) after the host's open files grew by %d", res.ExitCode, err, grew)
	if limit := (128 << 20) / config.FileBytes * 12 / 10; grew > limit {
		t.Errorf("the host's open files grew by %d, over the %d that 128 MiB bounds", grew, limit)
	}
	if grew < 10_000 {
		t.Errorf("the flood held only %d files: the attack did not run", grew)
	}
}

// TestWatchdogCountsEntriesAndTheFloor: in watchdog mode, empty files are
// charged (their inodes cost the host), and whatever the walk cannot see
// still stops the sandbox at the free-space floor.
func TestWatchdogCountsEntriesAndTheFloor(t *testing.T) {
	d := newDriver(t, func(c *docker.Config) { c.Quota = docker.QuotaWatch })
	s := create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 64 << 20}}, sandbox.Binding{WorkspaceDir: t.TempDir()})
	// 20,000 empty files: no data, 78 MiB of entries.
	req := guest.Shell("mkdir d && cd d && seq 20000 | xargs touch && sleep 30")
	req.TimeoutMS = 60_000
	s.Guest().Exec(context.Background(), req)
	if why := s.(sandbox.Stopper).Stopped(); !errors.Is(why, sandbox.ErrDiskQuota) {
		t.Errorf("20,000 empty files past a 64 MiB quota: stopped %v", why)
	}

	ws := t.TempDir()
	free, err := docker.DiskFree(ws)
	if err != nil {
		t.Fatal(err)
	}
	// A floor 512 MiB under the free space now; a file deleted while held
	// open (the walk cannot see it) goes past it.
	d = newDriver(t, func(c *docker.Config) { c.Quota = docker.QuotaWatch; c.MinFreeBytes = free - 512<<20 })
	s = create(t, d, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: 10 << 30}}, sandbox.Binding{WorkspaceDir: ws})
	req = guest.Shell("exec 3>hidden; rm hidden; for i in $(seq 12); do head -c 100000000 /dev/zero >&3; sync; done; sleep 30")
	req.TimeoutMS = 60_000
	s.Guest().Exec(context.Background(), req)
	if why := s.(sandbox.Stopper).Stopped(); !errors.Is(why, sandbox.ErrNoSpace) {
		t.Errorf("1.2 GB written past a floor 512 MiB away: stopped %v", why)
	}
}

// TestImageEntrypointDoesNotRun: a custom image's ENTRYPOINT would run as
// the sandbox before the guest listens (and take the guest as its
// arguments); the guest is the entrypoint instead.
func TestImageEntrypointDoesNotRun(t *testing.T) {
	tag := "agentbox-test-entrypoint:" + strconv.Itoa(os.Getpid())
	dockerfile := "FROM " + imageRef() + "\nENTRYPOINT [\"/bin/sh\", \"-c\", \"touch /workspace/entrypoint-ran; exec \\\"$@\\\"\", \"--\"]\n"
	build := exec.Command("docker", "build", "-q", "-t", tag, "-")
	build.Stdin = strings.NewReader(dockerfile)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	ws := t.TempDir()
	s := create(t, newDriver(t), sandbox.Spec{Image: tag}, sandbox.Binding{WorkspaceDir: ws})
	if res := sh(t, s, "ls /workspace"); strings.Contains(string(res.Stdout), "entrypoint-ran") {
		t.Error("the image's ENTRYPOINT ran in the sandbox")
	}
}

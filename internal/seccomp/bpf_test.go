package seccomp

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The audit architectures of seccomp_data.arch.
const (
	auditX86_64 = 0xc000003e
	auditI386   = 0x40000003
)

// call is a syscall as a seccomp filter sees it.
type call struct {
	name string
	args [6]uint64
	arch uint32 // 0: x86_64
	x32  bool   // the x32 ABI's bit set on the number
}

// data is c as struct seccomp_data, each 32-bit word big-endian: the
// kernel loads words in the host's order, x/net/bpf's VM in network order.
func (c call) data(t *testing.T) []byte {
	nr, ok := arch.X86_64.SyscallNames[c.name]
	if !ok {
		t.Fatalf("no syscall %s", c.name)
	}
	if c.x32 {
		nr |= arch.X32.SeccompMask
	}
	a := c.arch
	if a == 0 {
		a = auditX86_64
	}
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], a)
	for i, v := range c.args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(v))       // low word first (little-endian host)
		binary.BigEndian.PutUint32(b[16+8*i+4:], uint32(v>>32)) // then the high word
	}
	return b
}

const (
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// TestPolicy runs the guest's program, compiled from the profile, on the
// calls a sandbox makes and the ones it must not.
func TestPolicy(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the cases are x86_64's syscalls")
	}
	p, err := Parse(JSON)
	if err != nil {
		t.Fatal(err)
	}
	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
		unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	for _, tc := range []struct {
		kernel string
		c      call
		want   uint32
	}{
		{"6.1.0-56-cloud-amd64", call{name: "read"}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "execve"}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "arch_prctl"}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "io_uring_setup"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "io_uring_enter"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "keyctl"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "bpf"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "mount"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "reboot"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "unshare", args: [6]uint64{unix.CLONE_NEWUSER}}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "setns"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "clone", args: [6]uint64{threadFlags}}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "clone", args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "clone", args: [6]uint64{unix.CLONE_NEWNS}}, eperm},
		// ENOSYS, not EPERM: glibc falls back to clone, which the rule above checks.
		{"6.1.0-56-cloud-amd64", call{name: "clone3"}, enosys},
		{"6.1.0-56-cloud-amd64", call{name: "socket", args: [6]uint64{unix.AF_INET}}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "socket", args: [6]uint64{unix.AF_VSOCK}}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "socket", args: [6]uint64{unix.AF_VSOCK | 1<<32}}, allow}, // 64-bit compare
		{"6.1.0-56-cloud-amd64", call{name: "personality", args: [6]uint64{0}}, allow},
		{"6.1.0-56-cloud-amd64", call{name: "personality", args: [6]uint64{8}}, allow}, // PER_LINUX32
		{"6.1.0-56-cloud-amd64", call{name: "personality", args: [6]uint64{0xffffffff}}, allow},
		// A failed test of an argument must leave the syscall number, not
		// the argument, for the rules after it: 158 is arch_prctl's number.
		{"6.1.0-56-cloud-amd64", call{name: "personality", args: [6]uint64{158}}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "socket", args: [6]uint64{unix.AF_VSOCK, 158}}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "personality", args: [6]uint64{0x0040000}}, eperm}, // ADDR_NO_RANDOMIZE,
		{"6.1.0-56-cloud-amd64", call{name: "ptrace"}, allow},
		// ptrace's rule asks for 4.8; on an older kernel only CAP_SYS_PTRACE would allow it.
		{"4.4.0", call{name: "ptrace"}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "read", arch: auditI386}, eperm},
		{"6.1.0-56-cloud-amd64", call{name: "read", x32: true}, enosys},
	} {
		name := fmt.Sprintf("%s %s %#x arch %#x x32 %v", tc.kernel, tc.c.name, tc.c.args[0], tc.c.arch, tc.c.x32)
		t.Run(name, func(t *testing.T) {
			if got := run(t, p, tc.kernel, tc.c); got != tc.want {
				t.Errorf("action %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestPolicyEveryName checks every x86_64 syscall without argument rules
// against the profile: the first rule naming it that holds for a process
// without capabilities decides, else the default.
func TestPolicyEveryName(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86_64's syscall table")
	}
	p, err := Parse(JSON)
	if err != nil {
		t.Fatal(err)
	}
	vm := compile(t, p, "6.1.0")
	allowed := 0
	for name := range arch.X86_64.SyscallNames {
		want, conditional := eperm, false
		for _, r := range p.Syscalls {
			if !slices.Contains(r.Names, name) || !applies(r, "6.1.0") {
				continue
			}
			conditional = len(r.Args) > 0
			want = allow
			if r.Action != "SCMP_ACT_ALLOW" {
				want = unix.SECCOMP_RET_ERRNO | uint32(*r.ErrnoRet)
			}
			break
		}
		if conditional {
			continue
		}
		if want == allow {
			allowed++
		}
		if got := runOn(t, vm, call{name: name}); got != want {
			t.Errorf("%s: action %#x, want %#x", name, got, want)
		}
	}
	if allowed < 300 {
		t.Errorf("only %d syscalls allowed", allowed)
	}
}

// run compiles p for kernel and runs it on c.
func run(t *testing.T, p Profile, kernel string, c call) uint32 {
	t.Helper()
	return runOn(t, compile(t, p, kernel), c)
}

func compile(t *testing.T, p Profile, kernel string) *bpf.VM {
	t.Helper()
	prog, err := Program(p, kernel)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func runOn(t *testing.T, vm *bpf.VM, c call) uint32 {
	t.Helper()
	got, err := vm.Run(c.data(t))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release, min string
		want         bool
	}{
		{"6.1.0-56-cloud-amd64", "4.8", true},
		{"4.8.0", "4.8", true},
		{"4.7.10", "4.8", false},
		{"4.10-rc1", "4.8", true},
		{"3.19.0", "4.8", false},
		{"garbage", "4.8", false},
	} {
		if got := kernelAtLeast(tc.release, tc.min); got != tc.want {
			t.Errorf("kernelAtLeast(%q, %q) = %v, want %v", tc.release, tc.min, got, tc.want)
		}
	}
}

const applyChild = "AGENTBOX_SECCOMP_APPLY_CHILD"

// TestApply loads the program into this kernel, in a child process (a
// filter cannot be taken off), and checks what the child's syscalls do,
// and that a command it starts runs, under the same filter.
func TestApply(t *testing.T) {
	if os.Getenv(applyChild) == "1" {
		applyAndProbe()
		return
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the probes are x86_64's syscalls")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestApply$", "-test.count=1")
	cmd.Env = append(os.Environ(), applyChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{
		"io_uring_setup EPERM", "keyctl EPERM", "unshare(CLONE_NEWUSER) EPERM", "clone3 ENOSYS", "getpid ok",
		"sh: Seccomp:\t2", "sh: NoNewPrivs:\t1",
	} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("child printed no %q:\n%s", want, out)
		}
	}
}

// applyAndProbe is TestApply's child: it applies the profile and prints
// each probe's errno (or ok), then what a shell it starts says of itself.
func applyAndProbe() {
	if err := Apply(); err != nil {
		fmt.Println("apply:", err)
		os.Exit(1)
	}
	buf := make([]byte, 256)
	for _, p := range []struct {
		name string
		nr   uintptr
		args [3]uintptr
	}{
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, [3]uintptr{1, uintptr(unsafe.Pointer(&buf[0]))}},
		{"keyctl", unix.SYS_KEYCTL, [3]uintptr{0, ^uintptr(0)}},
		{"unshare(CLONE_NEWUSER)", unix.SYS_UNSHARE, [3]uintptr{unix.CLONE_NEWUSER}},
		{"clone3", unix.SYS_CLONE3, [3]uintptr{}},
		{"getpid", unix.SYS_GETPID, [3]uintptr{}},
	} {
		_, _, errno := unix.Syscall(p.nr, p.args[0], p.args[1], p.args[2])
		result := "ok"
		if errno != 0 {
			result = unix.ErrnoName(errno)
		}
		fmt.Println(p.name, result)
	}
	out, err := exec.Command("/bin/sh", "-c", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | sed 's/^/sh: /'").CombinedOutput()
	fmt.Printf("%s", out)
	if err != nil {
		fmt.Println("sh:", err)
	}
}

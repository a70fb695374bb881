package seccomp

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Apply puts the calling process, every thread of it and all it starts
// from now on under the profile (JSON), as Docker would for a container
// holding no capability on this kernel. It sets no_new_privs, which an
// unprivileged process needs to load a filter. A microVM's guest daemon
// calls it before it serves anything: there is no engine in the VM.
func Apply() error {
	p, err := Parse(JSON)
	if err != nil {
		return err
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("seccomp: uname: %w", err)
	}
	prog, err := Program(p, unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		return err
	}
	return load(prog)
}

// load installs prog on every thread of the process (TSYNC: the Go
// runtime's threads already run, and a command started from one without
// the filter would run without it).
func load(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread() // no_new_privs is the thread's; TSYNC passes it on
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: no_new_privs: %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: load filter: %w", errno)
	}
	if tid != 0 {
		return fmt.Errorf("seccomp: thread %d could not take the filter", tid)
	}
	return nil
}

// Program is p as a seccomp BPF program for this machine's architecture,
// for a process that holds no capability on a kernel of the given release
// (uname -r), weighing each rule as Docker does for a container whose
// capabilities are all dropped: a rule that includes a capability is left
// out, one that excludes capabilities is kept, one for another
// architecture or a newer kernel is left out, and a name this
// architecture has no syscall for is skipped (as libseccomp does).
//
// Unlike Docker, the program allows only the native ABI: a 32-bit (i386)
// syscall fails with the default errno and an x32 one with ENOSYS, where
// Docker's archMap allows both on x86_64.
//
// The syscall tables are github.com/elastic/go-seccomp-bpf's; its policy
// assembler is not used: v1.6.0 leaves a syscall's argument in the
// accumulator when an argument condition fails, so every rule after it
// compares that argument with its syscall numbers (personality(158) would
// pass as arch_prctl).
func Program(p Profile, kernel string) ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	def, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, err
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		def,
		loadNr,
	}
	if info.ID == arch.X86_64.ID {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1},
			errnoRet(unix.ENOSYS))
	}
	for _, r := range p.Syscalls {
		if !applies(r, kernel) {
			continue
		}
		code, err := rule(r, info)
		if err != nil {
			return nil, err
		}
		prog = append(prog, code...)
	}
	return append(prog, def), nil
}

// seccomp_data's offsets: the syscall number, the audit architecture and
// the six 64-bit arguments.
const (
	nrOffset   = 0
	archOffset = 4
	argsOffset = 16
)

var loadNr = bpf.LoadAbsolute{Off: nrOffset, Size: 4}

// applies says whether rule r holds for a process without capabilities,
// on runtime.GOARCH and the kernel release.
func applies(r Rule, kernel string) bool {
	if in := r.Includes; in != nil {
		if len(in.Caps) > 0 || len(in.Arches) > 0 && !slices.Contains(in.Arches, runtime.GOARCH) {
			return false
		}
		if in.MinKernel != "" && !kernelAtLeast(kernel, in.MinKernel) {
			return false
		}
	}
	if ex := r.Excludes; ex != nil {
		// Excluded capabilities are ones the process does not hold.
		if slices.Contains(ex.Arches, runtime.GOARCH) || ex.MinKernel != "" && kernelAtLeast(kernel, ex.MinKernel) {
			return false
		}
	}
	return true
}

// rule is r's code: with the syscall number in the accumulator, it
// returns r's action for r's names that this architecture knows, and
// falls through with the number still there otherwise.
func rule(r Rule, info *arch.Info) ([]bpf.Instruction, error) {
	act, err := action(r.Action, r.ErrnoRet)
	if err != nil {
		return nil, err
	}
	var nrs []uint32
	for _, name := range r.Names {
		if nr, ok := info.SyscallNames[name]; ok {
			nrs = append(nrs, uint32(nr|info.SeccompMask))
		}
	}
	if len(r.Args) == 0 {
		return anyOf(nrs, act), nil
	}
	var code []bpf.Instruction
	for _, nr := range nrs {
		c, err := withArgs(nr, r.Args, act)
		if err != nil {
			return nil, fmt.Errorf("seccomp: %v: %w", r.Names, err)
		}
		code = append(code, c...)
	}
	return code, nil
}

// anyOf returns act if the number is one of nrs: a jump per number to one
// return, in runs short enough for a conditional jump's 8-bit offset.
func anyOf(nrs []uint32, act bpf.Instruction) []bpf.Instruction {
	var code []bpf.Instruction
	for run := range slices.Chunk(nrs, 250) {
		for i, nr := range run {
			code = append(code, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(run) - i)})
		}
		code = append(code, bpf.Jump{Skip: 1}, act)
	}
	return code
}

// withArgs returns act for syscall nr when every one of args holds. Its
// tests load the arguments, so it ends by loading the number again.
func withArgs(nr uint32, args []Arg, act bpf.Instruction) ([]bpf.Instruction, error) {
	var body []bpf.Instruction
	var fails []int // jumps to the end, patched once it is known
	for _, a := range args {
		c, f, err := condition(a)
		if err != nil {
			return nil, err
		}
		for _, i := range f {
			fails = append(fails, len(body)+i)
		}
		body = append(body, c...)
	}
	body = append(body, act)
	for _, i := range fails {
		j := body[i].(bpf.JumpIf)
		skip := uint8(len(body) - i - 1)
		if j.SkipTrue == failMark {
			j.SkipTrue = skip
		} else {
			j.SkipFalse = skip
		}
		body[i] = j
	}
	head := bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: nr, SkipTrue: uint8(len(body))}
	return append(append([]bpf.Instruction{head}, body...), loadNr), nil
}

// failMark stands for the offset of the end of a rule's tests until it is
// known (withArgs patches it).
const failMark = 0xff

// condition is one argument's test: it falls through when a holds and
// jumps (at the returned indexes, marked failMark) to the end when not.
func condition(a Arg) ([]bpf.Instruction, []int, error) {
	hi := bpf.LoadAbsolute{Off: argsOffset + 8*uint32(a.Index) + 4, Size: 4} // little-endian: the high word second
	lo := bpf.LoadAbsolute{Off: argsOffset + 8*uint32(a.Index), Size: 4}
	vhi, vlo := uint32(a.Value>>32), uint32(a.Value)
	switch a.Op {
	case "SCMP_CMP_EQ":
		return []bpf.Instruction{hi, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: vhi, SkipTrue: failMark},
			lo, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: vlo, SkipTrue: failMark}}, []int{1, 3}, nil
	case "SCMP_CMP_NE":
		return []bpf.Instruction{hi, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: vhi, SkipTrue: 2},
			lo, bpf.JumpIf{Cond: bpf.JumpEqual, Val: vlo, SkipTrue: failMark}}, []int{3}, nil
	case "SCMP_CMP_MASKED_EQ": // (arg & Value) == ValueTwo
		whi, wlo := uint32(a.ValueTwo>>32), uint32(a.ValueTwo)
		return []bpf.Instruction{
			hi, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: vhi}, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: whi, SkipTrue: failMark},
			lo, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: vlo}, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: wlo, SkipTrue: failMark},
		}, []int{2, 5}, nil
	}
	return nil, nil, fmt.Errorf("comparison %q not supported", a.Op)
}

// action is a profile's action as a return; an errno of nil means EPERM.
func action(name string, errno *uint) (bpf.Instruction, error) {
	switch name {
	case "SCMP_ACT_ALLOW":
		return bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}, nil
	case "SCMP_ACT_ERRNO":
		e := uint(unix.EPERM)
		if errno != nil {
			e = *errno
		}
		if e > unix.SECCOMP_RET_DATA {
			return nil, fmt.Errorf("seccomp: errno %d out of range", e)
		}
		return errnoRet(unix.Errno(e)), nil
	}
	return nil, fmt.Errorf("seccomp: action %q not supported", name)
}

func errnoRet(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
}

// kernelAtLeast says whether release (uname -r: 6.1.0-56-cloud-amd64) is
// at least min (major.minor: 4.8). A release it cannot read is not.
func kernelAtLeast(release, min string) bool {
	r, okR := majorMinor(release)
	m, okM := majorMinor(min)
	return okR && okM && (r[0] > m[0] || r[0] == m[0] && r[1] >= m[1])
}

func majorMinor(v string) ([2]int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	minor, _, _ := strings.Cut(parts[1], "-")
	a, errA := strconv.Atoi(parts[0])
	b, errB := strconv.Atoi(minor)
	return [2]int{a, b}, errA == nil && errB == nil
}

// Package kvmprobe finds out whether this host's /dev/kvm can run a guest,
// by running one: it opens the device, creates a VM with one page of
// real-mode code (mov al, 42; out 0x10, al; hlt), runs its vCPU and checks
// that the guest wrote 42 to port 0x10 and halted. Opening /dev/kvm proves
// little: a device that opens may still not run guests (a VM whose host
// does not pass virtualization through, for one), and only running one
// tells.
package kvmprobe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device is the KVM device Probe tries.
const Device = "/dev/kvm"

// Timeout bounds a probe whose vCPU does not come back.
const Timeout = 2 * time.Second

// ErrTimedOut is a Result's Err when the guest did not halt within Timeout.
var ErrTimedOut = errors.New("timed out")

// Stage is how far a probe got.
type Stage int

// The stages, in order: a Result's Stage is the first that failed, or Ran.
const (
	NoDevice       Stage = iota // /dev/kvm does not exist
	CannotOpen                  // it exists but does not open
	CannotCreateVM              // it opens, but a VM cannot be created
	CannotRun                   // a VM was created, but its guest did not run to the end
	Ran                         // the test guest ran: it wrote to its port and halted
)

// Result says what a probe tried and how far it got.
type Result struct {
	Stage Stage
	Step  string        // the step that failed, such as "KVM_RUN"; empty when Ran
	Err   error         // why Step failed
	Took  time.Duration // from opening the device to the guest's halt, when Ran
}

// Reason is the failed step and its error, such as
// "KVM_RUN: EINVAL (invalid argument)"; empty when the guest ran.
func (r Result) Reason() string {
	if r.Stage == Ran {
		return ""
	}
	var errno unix.Errno
	if errors.As(r.Err, &errno) && unix.ErrnoName(errno) != "" {
		return fmt.Sprintf("%s: %s (%v)", r.Step, unix.ErrnoName(errno), r.Err)
	}
	return fmt.Sprintf("%s: %v", r.Step, r.Err)
}

// Permission reports whether the device exists but this user may not open it.
func (r Result) Permission() bool {
	return r.Stage == CannotOpen && errors.Is(r.Err, fs.ErrPermission)
}

// Probe runs a test guest on Device, giving up after Timeout. Its error
// is the context's, when ctx ends before the probe does; everything KVM
// refused is in the Result.
func Probe(ctx context.Context) (Result, error) {
	return probe(ctx, Device, code, Timeout)
}

// probe runs guestCode on dev; the vCPU runs on a thread of its own, which
// probe interrupts (see stopper) when the guest outlasts timeout or ctx.
func probe(ctx context.Context, dev string, guestCode []byte, timeout time.Duration) (Result, error) {
	done := make(chan Result, 1)
	st := &stopper{}
	go func() {
		// KVM wants a vCPU's ioctls from the thread that created it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		st.tid.Store(int32(unix.Gettid()))
		done <- run(dev, guestCode, st)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r, nil
	case <-timer.C:
		st.stop(done)
		return Result{Stage: CannotRun, Step: "KVM_RUN", Err: fmt.Errorf("%w after %v", ErrTimedOut, timeout)}, nil
	case <-ctx.Done():
		st.stop(done)
		return Result{}, fmt.Errorf("probe %s: %w", dev, ctx.Err())
	}
}

// stopper interrupts a vCPU that does not exit: a signal to its thread
// makes KVM_RUN return EINTR, and the run loop then sees stopped.
type stopper struct {
	tid     atomic.Int32
	stopped atomic.Bool
}

// stop signals the vCPU's thread until the probe returns, for at most a
// second. SIGURG is the one Go programs tolerate unasked (the runtime's
// preemption uses it).
func (s *stopper) stop(done <-chan Result) {
	s.stopped.Store(true)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range 100 {
		if tid := s.tid.Load(); tid != 0 {
			unix.Tgkill(unix.Getpid(), int(tid), unix.SIGURG)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// run does the probe's steps on this thread.
func run(dev string, guestCode []byte, st *stopper) Result {
	start := time.Now()
	if _, err := os.Stat(dev); errors.Is(err, fs.ErrNotExist) {
		return Result{Stage: NoDevice, Step: "stat " + dev, Err: err}
	}
	kvm, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return Result{Stage: CannotOpen, Step: "open " + dev, Err: err}
	}
	defer unix.Close(kvm)
	v, err := ioctl(kvm, kvmGetAPIVersion, nil)
	if err == nil && v != apiVersion {
		err = fmt.Errorf("API version %d, want %d", v, apiVersion)
	}
	if err != nil {
		return Result{Stage: CannotCreateVM, Step: "KVM_GET_API_VERSION", Err: err}
	}
	vm, err := ioctl(kvm, kvmCreateVM, nil)
	if err != nil {
		return Result{Stage: CannotCreateVM, Step: "KVM_CREATE_VM", Err: err}
	}
	defer unix.Close(vm)
	g := guest{kvm: kvm, vm: vm, code: guestCode, stop: &st.stopped}
	defer g.release()
	if step, err := g.runToHalt(); err != nil {
		return Result{Stage: CannotRun, Step: step, Err: err}
	}
	return Result{Stage: Ran, Took: time.Since(start)}
}

// ioctl is one KVM ioctl whose argument, if any, is the struct at arg.
func ioctl(fd int, req uintptr, arg unsafe.Pointer) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// le is the byte order of the kvm_run area on x86-64.
var le = binary.LittleEndian

package kvmprobe

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The test guest: its code at codeAddr, in real mode, writes outValue to
// outPort and halts.
const (
	codeAddr = 0x1000
	outPort  = 0x10
	outValue = 42
	pageSize = 0x1000
)

var code = []byte{
	0xB0, outValue, // mov al, 42
	0xE6, outPort, // out 0x10, al
	0xF4, // hlt
}

// guest is the probe's VM: its memory, its one vCPU and the vCPU's
// kvm_run area.
type guest struct {
	kvm, vm int
	code    []byte       // what the guest runs: code, or a test's
	stop    *atomic.Bool // set when the probe gives up
	mem     []byte
	vcpu    int
	run     []byte
}

// release unmaps and closes what the guest holds.
func (g *guest) release() {
	if g.run != nil {
		unix.Munmap(g.run)
	}
	if g.vcpu > 0 {
		unix.Close(g.vcpu)
	}
	if g.mem != nil {
		unix.Munmap(g.mem)
	}
}

// runToHalt sets the guest up and runs it; it returns the step that
// failed and why.
func (g *guest) runToHalt() (string, error) {
	for _, s := range []struct {
		step string
		do   func() error
	}{
		{"map guest memory", g.mapMemory},
		{"KVM_SET_USER_MEMORY_REGION", g.setMemoryRegion},
		{"KVM_CREATE_VCPU", g.createVCPU},
		{"map kvm_run", g.mapRun},
		{"KVM_SET_SREGS", g.setSregs},
		{"KVM_SET_REGS", g.setRegs},
		{"KVM_RUN", g.runExits},
	} {
		if err := s.do(); err != nil {
			return s.step, err
		}
	}
	return "", nil
}

func (g *guest) mapMemory() (err error) {
	g.mem, err = unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	copy(g.mem, g.code)
	return nil
}

func (g *guest) setMemoryRegion() error {
	region := userMemoryRegion{
		GuestPhysAddr: codeAddr,
		MemorySize:    pageSize,
		UserspaceAddr: uint64(uintptr(unsafe.Pointer(&g.mem[0]))),
	}
	_, err := ioctl(g.vm, kvmSetUserMemoryRegion, unsafe.Pointer(&region))
	return err
}

func (g *guest) createVCPU() (err error) {
	g.vcpu, err = ioctl(g.vm, kvmCreateVCPU, nil)
	return err
}

func (g *guest) mapRun() error {
	size, err := ioctl(g.kvm, kvmGetVCPUMmapSize, nil)
	if err != nil {
		return fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	g.run, err = unix.Mmap(g.vcpu, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	return err
}

// setSregs puts the code segment at 0, so that rip is the code's address.
func (g *guest) setSregs() error {
	var s sregs
	if _, err := ioctl(g.vcpu, kvmGetSregs, unsafe.Pointer(&s)); err != nil {
		return fmt.Errorf("KVM_GET_SREGS: %w", err)
	}
	s.CS.Base, s.CS.Selector = 0, 0
	_, err := ioctl(g.vcpu, kvmSetSregs, unsafe.Pointer(&s))
	return err
}

func (g *guest) setRegs() error {
	r := regs{RIP: codeAddr, RFLAGS: 0x2}
	_, err := ioctl(g.vcpu, kvmSetRegs, unsafe.Pointer(&r))
	return err
}

// runExits runs the vCPU and wants two exits: the OUT, then the HLT.
func (g *guest) runExits() error {
	reason, err := g.runOnce()
	if err != nil {
		return err
	}
	if reason != exitIO {
		return g.unexpected(reason, "IO")
	}
	if err := g.checkOut(); err != nil {
		return err
	}
	if reason, err = g.runOnce(); err != nil {
		return err
	}
	if reason != exitHLT {
		return g.unexpected(reason, "HLT")
	}
	return nil
}

// runOnce runs the vCPU until an exit other than a signal's.
func (g *guest) runOnce() (uint32, error) {
	for {
		if g.stop.Load() {
			return 0, ErrTimedOut
		}
		_, err := ioctl(g.vcpu, kvmRun, nil)
		if errors.Is(err, unix.EINTR) {
			continue // a signal: the Go runtime's, or the stopper's
		}
		if err != nil {
			return 0, err
		}
		return le.Uint32(g.run[runExitReason:]), nil
	}
}

// checkOut checks the IO exit is the guest's OUT of outValue to outPort.
func (g *guest) checkOut() error {
	io := g.run[runUnion:]
	dir, size, port := io[0], io[1], le.Uint16(io[2:])
	off := le.Uint64(io[8:])
	if dir != ioOut || size != 1 || port != outPort || off >= uint64(len(g.run)) {
		return fmt.Errorf("IO exit: direction %d size %d port %#x, want an OUT of 1 byte to %#x", dir, size, port, outPort)
	}
	if v := g.run[off]; v != outValue {
		return fmt.Errorf("IO exit: the guest wrote %d, want %d", v, outValue)
	}
	return nil
}

// unexpected describes an exit other than the one wanted, with the
// details KVM gives for a failed entry or an internal error.
func (g *guest) unexpected(reason uint32, want string) error {
	name := exitNames[reason]
	if name == "" {
		name = fmt.Sprint(reason)
	}
	detail := ""
	switch reason {
	case exitFailEntry:
		detail = fmt.Sprintf(", hardware entry failure reason %#x", le.Uint64(g.run[runUnion:]))
	case exitInternal:
		detail = fmt.Sprintf(", suberror %d", le.Uint32(g.run[runUnion:]))
	}
	return fmt.Errorf("exit %s%s, want %s", name, detail, want)
}

package kvmprobe

// The KVM ABI this probe uses, from <linux/kvm.h> and <asm/kvm.h> on
// x86-64; golang.org/x/sys/unix does not define it.

// The ioctl requests: _IO(0xAE, n), and _IOR/_IOW for those that carry a
// struct (the size is in bits 16-29).
const (
	kvmGetAPIVersion       = 0xAE00
	kvmCreateVM            = 0xAE01
	kvmGetVCPUMmapSize     = 0xAE04
	kvmCreateVCPU          = 0xAE41
	kvmSetUserMemoryRegion = 0x4020AE46
	kvmRun                 = 0xAE80
	kvmSetRegs             = 0x4090AE82
	kvmGetSregs            = 0x8138AE83
	kvmSetSregs            = 0x4138AE84
)

// apiVersion is the only KVM API version there is.
const apiVersion = 12

// The exit reasons of kvm_run.exit_reason this probe names.
var exitNames = map[uint32]string{
	0: "UNKNOWN", 1: "EXCEPTION", 2: "IO", 4: "DEBUG", 5: "HLT", 6: "MMIO",
	8: "SHUTDOWN", 9: "FAIL_ENTRY", 10: "INTR", 17: "INTERNAL_ERROR",
}

const (
	exitIO        = 2
	exitHLT       = 5
	exitFailEntry = 9
	exitInternal  = 17
	ioOut         = 1 // kvm_run.io.direction of an OUT
)

// Offsets into the kvm_run area the vCPU shares with us.
const (
	runExitReason = 8  // __u32 exit_reason
	runUnion      = 32 // the exit's details: io, fail_entry, internal
)

// userMemoryRegion is struct kvm_userspace_memory_region.
type userMemoryRegion struct {
	Slot          uint32
	Flags         uint32
	GuestPhysAddr uint64
	MemorySize    uint64
	UserspaceAddr uint64
}

// regs is struct kvm_regs.
type regs struct {
	RAX, RBX, RCX, RDX, RSI, RDI, RSP, RBP uint64
	R8, R9, R10, R11, R12, R13, R14, R15   uint64
	RIP, RFLAGS                            uint64
}

// segment is struct kvm_segment.
type segment struct {
	Base                         uint64
	Limit                        uint32
	Selector                     uint16
	Type, Present, DPL, DB, S, L uint8
	G, AVL, Unusable, Padding    uint8
}

// dtable is struct kvm_dtable.
type dtable struct {
	Base    uint64
	Limit   uint16
	Padding [3]uint16
}

// sregs is struct kvm_sregs (312 bytes).
type sregs struct {
	CS, DS, ES, FS, GS, SS, TR, LDT segment
	GDT, IDT                        dtable
	CR0, CR2, CR3, CR4, CR8, EFER   uint64
	APICBase                        uint64
	InterruptBitmap                 [4]uint64
}

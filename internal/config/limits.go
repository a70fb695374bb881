package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/units"
)

// ParseUIDRange parses "FIRST-LAST", an inclusive range of uids.
func ParseUIDRange(v string) (UIDRange, error) {
	a, b, ok := strings.Cut(v, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return UIDRange{}, fmt.Errorf("uid range %q: want FIRST-LAST, like 200000-299999", v)
	}
	return UIDRange{first, last}, nil
}

// String is the range as ParseUIDRange reads it.
func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Validate refuses a range that reaches system or common login uids (below
// 10000), the overflow uid, or holds fewer than 16 uids.
func (r UIDRange) Validate() error {
	if r.First < 10000 || r.Last < r.First+15 || r.Last >= 1<<31-1 || r.First <= 65534 && r.Last >= 65534 {
		return fmt.Errorf("sandbox uids %s: want at least 16 uids from 10000 up, not including 65534 (nobody)", r)
	}
	return nil
}

// hostCeilings are the default ceilings: half the host's memory, all its
// CPUs, 4096 processes, 100 GiB of disk, a day, 100,000 steps.
func hostCeilings() Ceilings {
	mem := hostMemory() / 2
	return Ceilings{
		MemoryBytes: max(mem, 2<<30), NanoCPUs: int64(runtime.NumCPU()) * 1e9, PidsLimit: 4096,
		DiskBytes: 100 << 30, Timeout: 24 * time.Hour, MaxSteps: 100_000,
	}
}

// hostMemory is MemTotal from /proc/meminfo, or 0 when unknown.
func hostMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// validateLimits checks the sandbox defaults against the ceilings and the
// new limits' own ranges.
func (s Sandbox) validateLimits() error {
	var errs []error
	c := s.Ceilings
	if c.MemoryBytes < 64<<20 || c.NanoCPUs < 1e7 || c.PidsLimit < 32 || c.DiskBytes < 64<<20 || c.Timeout < time.Second || c.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("ceilings %+v: each must allow at least the smallest sandbox (64MiB memory and disk, 0.01 CPU, 32 processes, 1s, 1 step)", c))
	}
	over := func(name string, v, ceiling int64, text func(int64) string) {
		if v > ceiling {
			errs = append(errs, fmt.Errorf("default sandbox %s %s is over its ceiling %s (AGENTBOX_CEILING_%s)", name, text(v), text(ceiling), strings.ToUpper(name)))
		}
	}
	over("memory", s.MemoryBytes, c.MemoryBytes, units.FormatSize)
	over("cpus", s.NanoCPUs, c.NanoCPUs, units.FormatCPUs)
	over("pids", s.PidsLimit, c.PidsLimit, countText)
	over("disk", s.DiskBytes, c.DiskBytes, units.FormatSize)
	if s.DiskBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("sandbox disk %s: at least 64MiB", units.FormatSize(s.DiskBytes)))
	}
	if s.NoFile < 64 || s.NoFile > 1<<20 {
		errs = append(errs, fmt.Errorf("sandbox open files %d: want 64 to 1048576 (AGENTBOX_SANDBOX_NOFILE)", s.NoFile))
	}
	if s.MinFreeDisk < 0 {
		errs = append(errs, errors.New("AGENTBOX_MIN_FREE_DISK: must not be negative"))
	}
	if s.MinFreeInodes < 0 {
		errs = append(errs, errors.New("AGENTBOX_MIN_FREE_INODES: must not be negative"))
	}
	return errors.Join(append(errs, s.UIDs.Validate())...)
}

func countText(n int64) string { return strconv.FormatInt(n, 10) }

// FileBudget is the worst case of open files the sandboxes can hold at
// once: every one of concurrency sandboxes at its pids ceiling, each
// process at its RLIMIT_NOFILE.
func FileBudget(concurrency int, pids, nofile int64) int64 {
	return int64(max(concurrency, 1)) * pids * nofile
}

// FileShare is the share of the host's fs.file-max the sandboxes together
// may hold: the rest stays for the host, the server and the engine.
const FileShare = 0.5

// HostFileMax reads fs.file-max.
func HostFileMax() (int64, error) {
	b, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		return 0, fmt.Errorf("fs.file-max: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// FileMaxUnlimited is the fs.file-max from which the host's file table
// is unbounded in effect: Linux's default since 5.x is LONG_MAX
// (9223372036854775807), where memory is the only bound.
const FileMaxUnlimited int64 = 1 << 62

// MinNoFile is the fewest open files per process FitFiles clamps to.
const MinNoFile = 256

// FitFiles returns the RLIMIT_NOFILE to give sandbox processes so that
// concurrency sandboxes at pids processes each stay within FileShare of the
// host's fs.file-max: nofile itself when it fits, else lowered (clamped)
// to fit. A fit below MinNoFile is refused, naming the settings to lower.
func FitFiles(fileMax int64, concurrency int, pids, nofile int64) (int64, error) {
	allow := int64(float64(fileMax) * FileShare)
	if FileBudget(concurrency, pids, nofile) <= allow {
		return nofile, nil
	}
	fit := allow / FileBudget(concurrency, pids, 1)
	if fit < MinNoFile {
		return 0, fmt.Errorf("%d sandboxes × %d processes (AGENTBOX_CEILING_PIDS) × %d open files each could exhaust the host's file table (over half of fs.file-max, %d): lower the concurrency or the pids ceiling, or raise fs.file-max",
			max(concurrency, 1), pids, MinNoFile, fileMax)
	}
	return fit, nil
}

// FileBytes is the least kernel memory one open file costs (a struct file
// and what it pins; ~440 bytes measured). A process can hold open files
// past RLIMIT_NOFILE by mapping them and closing the descriptors (up to
// vm.max_map_count, 65530, each), and that memory is charged to its
// sandbox: a sandbox's memory limit, not its open-files limit, bounds how
// many files it can hold in the host's file table.
const FileBytes = 400

// FileTableNeed is the fs.file-max under which concurrency sandboxes of
// memory bytes each could together hold more than FileShare of the file
// table.
func FileTableNeed(concurrency int, memory int64) int64 {
	return int64(float64(int64(max(concurrency, 1))*(memory/FileBytes)) / FileShare)
}

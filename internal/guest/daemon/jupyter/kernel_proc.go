package jupyter

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// kproc identifies the kernel's process: its pid, and its start time so a
// reused pid is not taken for it. The kernel runs in the guest's pid
// namespace, so the guest can watch it directly, which catches a kill at
// once, where the notebook server notices only on its next poll.
type kproc struct {
	pid   int
	start uint64 // clock ticks after boot, from /proc/<pid>/stat
}

// procStat returns a process's state letter and start time.
func procStat(pid int) (state byte, start uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may contain anything, so the
	// fields are counted from the last ')': state is field 3, starttime 22.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], start, true
}

// findProc identifies the process pid, if it is running.
func findProc(pid int) (kproc, bool) {
	if pid <= 0 {
		return kproc{}, false
	}
	state, start, ok := procStat(pid)
	if !ok || state == 'Z' || state == 'X' {
		return kproc{}, false
	}
	return kproc{pid: pid, start: start}, true
}

// known says whether the process is identified at all.
func (p kproc) known() bool { return p.pid > 0 }

// alive says whether the process is still running; an unknown one is
// assumed to be.
func (p kproc) alive() bool {
	if !p.known() {
		return true
	}
	q, ok := findProc(p.pid)
	return ok && q.start == p.start
}

// kill ends the process if it is still the one identified.
func (p kproc) kill() {
	if p.known() && p.alive() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

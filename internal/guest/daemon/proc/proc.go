// Package proc owns what the guest does to the sandbox's processes through
// /proc and signals: kill a command's whole process tree, make a process the
// out-of-memory killer's first choice, and count the kills that killer made.
package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// KillTree kills pid's process group and every descendant of pid, including
// those that moved to a group or session of their own. It repeats the group
// kill until the group is empty so a fork bomb cannot outrun it.
func KillTree(pid int) {
	// Listed first (once the command dies its orphans lose the parent link),
	// killed after the group: a shell whose children died first would go on
	// and exit 0 before it is killed.
	escaped := Descendants(pid)
	for range 100 {
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			break // ESRCH: nothing left in the group
		}
	}
	for _, p := range escaped {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// Descendants lists the processes below pid, from /proc.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := parentOf(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may contain spaces and parentheses; fields resume after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// RaiseOOMScore makes a command, rather than the guest, the out-of-memory
// killer's first choice. Raising the score needs no privilege.
func RaiseOOMScore(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("500"), 0)
}

// OOMKills returns the cgroup's count of OOM kills (cgroup v2 or v1), or -1.
func OOMKills() int64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				fh.Close()
				return n
			}
		}
		fh.Close()
	}
	return -1
}

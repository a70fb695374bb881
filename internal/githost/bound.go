package githost

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrBound means a git run was stopped at its memory or CPU bound.
var ErrBound = errors.New("over its bound")

// gate is the shell every git run starts as: it waits for a line on fd
// 3, which comes once the bounds are set on its pid, then becomes git
// ($0) with the same pid. Go's exec has no rlimit of the child's own,
// and setting them on a git already running would race its first
// allocations.
const gate = `read -r _ <&3 || exit 125; exec 3<&-; exec "$0" "$@"`

// command is git with args, under ctx, made to be started by start.
func (h *Host) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", gate, h.cfg.Git}, args...)...)
	// git's children (ssh, remote helpers, upload-pack) die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// start starts cmd (from command) and lets git run once its bounds are
// set: RLIMIT_DATA at Config.Memory (malloc and private mappings; a
// pack git maps read-only is not counted), RLIMIT_CPU at the timeout,
// and a lower scheduling priority than the server's own work.
func (h *Host) start(cmd *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("git: %w", err)
	}
	defer w.Close()
	cmd.ExtraFiles = []*os.File{r}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return err
	}
	if err = h.bound(cmd.Process.Pid); err == nil {
		_, err = w.Write([]byte("\n"))
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return fmt.Errorf("git: bound its resources: %w", err)
	}
	return nil
}

// bound sets the limits of git run pid. The priority is best effort: a
// server already niced past 10 could not take it back.
func (h *Host) bound(pid int) error {
	mem := uint64(h.cfg.Memory)
	if err := limit(pid, unix.RLIMIT_DATA, mem, mem); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	cpu := uint64(math.Ceil(h.cfg.Timeout.Seconds()))
	if err := limit(pid, unix.RLIMIT_CPU, cpu, cpu+1); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, pid, 10)
	return nil
}

// limit sets resource res of pid to soft cur and hard max, or to this
// process's own hard limit if that is lower (raising it takes a
// privilege the server need not have).
func limit(pid, res int, cur, max uint64) error {
	var own unix.Rlimit
	if err := unix.Getrlimit(res, &own); err == nil {
		cur, max = min(cur, own.Max), min(max, own.Max)
	}
	return unix.Prlimit(pid, res, &unix.Rlimit{Cur: cur, Max: max}, nil)
}

// overBound says which bound stopped a failed git run, if one did: the
// CPU one kills it with SIGXCPU (SIGKILL at the hard limit), the memory
// one makes its allocations fail, which git dies of.
func (h *Host) overBound(ps *os.ProcessState, stderr string) string {
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL) {
			return fmt.Sprintf("it used its %s of CPU time (AGENTBOX_GIT_TIMEOUT)", h.cfg.Timeout)
		}
	}
	s := strings.ToLower(stderr)
	if strings.Contains(s, "out of memory") || strings.Contains(s, "cannot allocate memory") {
		return fmt.Sprintf("it needed more than its %d MiB of memory (AGENTBOX_GIT_MEMORY)", h.cfg.Memory>>20)
	}
	return ""
}

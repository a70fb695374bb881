package microvm

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fsSocket is the vhost-user socket between QEMU and virtiofsd in dir.
func fsSocket(dir string) string { return filepath.Join(dir, "fs.sock") }

// fsDaemon is a running virtiofsd serving one VM's workspace.
type fsDaemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startVirtioFSD starts virtiofsd on cfg.WorkspaceDir, listening on the
// socket QEMU connects to. The socket is made here and handed over
// (--fd), so it exists before QEMU starts. virtiofsd dies with this
// process, as QEMU does, and exits by itself when QEMU disconnects.
func startVirtioFSD(cfg Config) (*fsDaemon, error) {
	sock := fsSocket(cfg.Dir)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("virtiofsd: %w", err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // the socket stays for QEMU; virtiofsd has it
	defer l.Close()
	lf, err := ul.File()
	if err != nil {
		return nil, fmt.Errorf("virtiofsd: %w", err)
	}
	defer lf.Close()
	cmd := exec.Command(cfg.VirtioFSD, "--fd=3", "-o", "source="+cfg.WorkspaceDir, "-o", "cache=auto",
		// No device nodes and no file capabilities, even for a guest kernel
		// taken over: the share is a live host directory for a caller's own.
		"-o", "modcaps=-mknod:-setfcap",
		"-o", "log_level=warn", "--rlimit-nofile="+strconv.FormatInt(fsNoFile(cfg.NoFile, hostNoFileCeiling()), 10))
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Stderr = cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d := &fsDaemon{cmd: cmd, exited: make(chan struct{})}
	if err := startPinned(cmd, func(error) { close(d.exited) }); err != nil {
		return nil, fmt.Errorf("virtiofsd: start %s: %w", cfg.VirtioFSD, err)
	}
	return d, nil
}

// fsNoFile is virtiofsd's open-files limit (soft and hard) for a sandbox
// whose processes may each open noFile files. virtiofsd holds a
// descriptor for each file the guest has open and for each inode the
// guest's kernel keeps (every file it looked up and has not forgotten:
// a node_modules tree), so it needs many times the sandbox's own limit.
// Left to inherit it, it had the caller's soft limit, 1024 under
// systemd's and Docker's defaults, and the guest's file operations failed
// after about a thousand files (npm install). Each descriptor pins a host
// inode in the host's kernel memory, so the limit is bounded: 64 for
// each file a process may open, at least 65,536, at most 1,048,576
// (virtiofsd's own ceiling) and ceiling, what this process may give
// (hostNoFileCeiling).
func fsNoFile(noFile, ceiling int64) int64 {
	n := int64(1 << 20)
	if noFile < n/64 {
		n = max(noFile*64, 1<<16)
	}
	if ceiling > 0 {
		n = min(n, ceiling)
	}
	return n
}

// hostNoFileCeiling is the highest open-files limit virtiofsd can take
// from this process: its own hard limit, which only CAP_SYS_RESOURCE
// raises (virtiofsd ignores a refused setrlimit and keeps the inherited
// limit), and the kernel's fs.nr_open. 0 if neither can be read.
func hostNoFileCeiling() int64 {
	var c int64
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < 1<<62 && !hasCap(capSysResource) {
		c = int64(lim.Max)
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (c == 0 || n < c) {
			c = n
		}
	}
	return c
}

// capSysResource is CAP_SYS_RESOURCE's bit.
const capSysResource = 24

// hasCap says whether this process holds capability bit in its effective set.
func hasCap(bit uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && v&(1<<bit) != 0
		}
	}
	return false
}

// stop kills virtiofsd (if it has not exited with QEMU) and waits for it.
func (d *fsDaemon) stop() {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
}

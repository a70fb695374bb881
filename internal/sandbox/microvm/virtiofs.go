package microvm

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
		"-o", "log_level=warn", "--rlimit-nofile=0")
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Stderr = cfg.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d := &fsDaemon{cmd: cmd, exited: make(chan struct{})}
	if err := startPinned(cmd, func(error) { close(d.exited) }); err != nil {
		return nil, fmt.Errorf("virtiofsd: start %s: %w", cfg.VirtioFSD, err)
	}
	return d, nil
}

// stop kills virtiofsd (if it has not exited with QEMU) and waits for it.
func (d *fsDaemon) stop() {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
}

package microvm

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// qemuFiles are the files QEMU is handed open, as its descriptors 3, 4, …
// (exec.Cmd.ExtraFiles): the kernel, the initramfs and the disks it
// reads, its end of the guest port's socket pair and its connection to
// virtiofsd. An unprivileged QEMU reaches none of their paths (the data
// dir, the state dirs, the workspace are root's), and needs none.
type qemuFiles struct {
	files []*os.File
	index map[string]int
}

// add hands QEMU f under name.
func (q *qemuFiles) add(name string, f *os.File) {
	if q.index == nil {
		q.index = map[string]int{}
	}
	q.index[name] = 3 + len(q.files)
	q.files = append(q.files, f)
}

// fd is the descriptor QEMU has the file name as.
func (q *qemuFiles) fd(name string) int {
	n, ok := q.index[name]
	if !ok {
		panic("microvm: no file " + name + " for QEMU") // a bug: args asks only for what hostFiles added
	}
	return n
}

// close closes this process's copies (QEMU keeps its own); it can be
// called again.
func (q *qemuFiles) close() {
	for _, f := range q.files {
		f.Close()
	}
}

// hostFiles opens what QEMU is given for cfg, starts the workspace's
// virtiofsd if there is one, and returns the host's end of the guest
// port.
func (v *VM) hostFiles(cfg Config) (*qemuFiles, net.Conn, error) {
	q := &qemuFiles{}
	ok := false
	defer func() {
		if !ok {
			q.close()
		}
	}()
	for _, f := range []struct{ name, path string }{{"kernel", cfg.Kernel}, {"initrd", cfg.Initramfs}, {"rootfs", cfg.Rootfs}, {"config", cfg.ConfigDisk}} {
		if f.path == "" {
			continue
		}
		file, err := os.OpenFile(f.path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, nil, err
		}
		q.add(f.name, file)
	}
	host, guestEnd, err := socketPair()
	if err != nil {
		return nil, nil, err
	}
	q.add("serial", guestEnd)
	if cfg.WorkspaceDir != "" {
		fs, err := v.startFS(cfg)
		if err != nil {
			host.Close()
			return nil, nil, err
		}
		q.add("fs", fs)
	}
	ok = true
	return q, host, nil
}

// socketPair is a connected pair of unix stream sockets: one end for this
// process, as a net.Conn, the other for QEMU.
func socketPair() (net.Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("guest port: %w", err)
	}
	hostFile := os.NewFile(uintptr(fds[0]), "guest-port")
	defer hostFile.Close() // FileConn dups it
	host, err := net.FileConn(hostFile)
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("guest port: %w", err)
	}
	return host, os.NewFile(uintptr(fds[1]), "guest-port-qemu"), nil
}

// startFS starts the workspace's virtiofsd and returns a connection to
// it for QEMU's vhost-user device: made here, as root, on the socket the
// daemon listens on.
func (v *VM) startFS(cfg Config) (*os.File, error) {
	var err error
	if v.fsd, err = startVirtioFSD(cfg); err != nil {
		return nil, err
	}
	c, err := net.Dial("unix", fsSocket(cfg.Dir))
	if err == nil {
		defer c.Close()
		var f *os.File
		if f, err = c.(*net.UnixConn).File(); err == nil {
			return f, nil
		}
	}
	v.fsd.stop()
	v.fsd = nil
	return nil, fmt.Errorf("virtiofsd: connect: %w", err)
}

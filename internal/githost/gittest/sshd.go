package gittest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// sshdRoot holds one directory per running test sshd (config, keys,
// pidfile, the pid of the test process that owns it), at a fixed place so
// that the next run finds what a killed one left.
var sshdRoot = filepath.Join(os.TempDir(), "agentbox-gittest")

// SSH is a running OpenSSH server serving the bare repositories under Root
// to User, who logs in with the key KeyFile.
type SSH struct {
	Root string
	Port int
	User string
	// KeyFile is the client's private key (no passphrase); Key its contents.
	KeyFile string
	Key     []byte
	// KnownHosts is a known_hosts file holding the server's host key.
	KnownHosts string
	dir        string
}

// URL is the ssh:// URL of repository name (a path under Root).
func (s *SSH) URL(name string) string {
	return fmt.Sprintf("ssh://%s@127.0.0.1:%d%s", s.User, s.Port, filepath.Join(s.Root, name))
}

// Path is the path of repository name on the server.
func (s *SSH) Path(name string) string { return filepath.Join(s.Root, name) }

// StartSSH runs Debian's sshd (/usr/sbin/sshd) on a loopback port as the
// current user, with a generated host key and one authorized client key,
// no PAM and no password logins, until the test ends. It skips the test
// without sshd, but fails it in CI (see testenv.Tool).
func StartSSH(t testing.TB) *SSH {
	t.Helper()
	sshd := testenv.Tool(t, "/usr/sbin/sshd", "apt-get install openssh-server")
	keygen := testenv.Tool(t, "ssh-keygen", "apt-get install openssh-client")
	reapStale()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sshdRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(sshdRoot, "sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &SSH{Root: filepath.Join(dir, "repos"), User: u.Username, KeyFile: filepath.Join(dir, "client_ed25519"), dir: dir}
	s.keys(t, keygen)
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation dir, which its service unit makes
	}
	for try := 0; ; try++ {
		err := s.start(t, sshd)
		if err == nil {
			break
		}
		if try == 4 {
			t.Fatalf("sshd: %v", err)
		}
	}
	return s
}

// keys makes the host and client keys, authorizes the client's, and
// writes KnownHosts once the port is known (start).
func (s *SSH) keys(t testing.TB, keygen string) {
	t.Helper()
	for _, k := range []string{"host_ed25519", "client_ed25519"} {
		out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "gittest", "-f", filepath.Join(s.dir, k)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(s.KeyFile + ".pub")
	if err == nil {
		err = os.WriteFile(filepath.Join(s.dir, "authorized_keys"), pub, 0o600)
	}
	if err == nil {
		s.Key, err = os.ReadFile(s.KeyFile)
	}
	if err == nil {
		err = os.MkdirAll(s.Root, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(s.dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// start runs sshd on a free port and waits until it listens; an error
// means it exited first (the port was taken meanwhile).
func (s *SSH) start(t testing.TB, sshd string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := filepath.Join(s.dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(s.config(port)), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", conf)
	// Should the test process die, so does sshd (and reapStale catches
	// what this misses).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	log, ok := awaitListening(stderr)
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("did not start:\n%s", log)
	}
	go io.Copy(io.Discard, stderr) // sshd logs each connection
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	s.Port = port
	host, err := os.ReadFile(filepath.Join(s.dir, "host_ed25519.pub"))
	if err != nil {
		return err
	}
	f := strings.Fields(string(host))
	s.KnownHosts = filepath.Join(s.dir, "known_hosts")
	return os.WriteFile(s.KnownHosts, fmt.Appendf(nil, "[127.0.0.1]:%d %s %s\n", port, f[0], f[1]), 0o600)
}

// awaitListening reads sshd's log until it says it listens (true) or ends.
func awaitListening(r io.Reader) (string, bool) {
	var log strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Server listening on") {
			return log.String(), true
		}
	}
	return log.String(), false
}

func (s *SSH) config(port int) string {
	return fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_ed25519
PidFile %[2]s/sshd.pid
AuthorizedKeysFile %[2]s/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers %[3]s
PrintMotd no
PrintLastLog no
UseDNS no
LogLevel INFO
`, port, s.dir, s.User)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// reapStale kills the sshds of test processes that are gone and removes
// their directories.
func reapStale() {
	dirs, _ := filepath.Glob(filepath.Join(sshdRoot, "sshd-*"))
	for _, dir := range dirs {
		owner := readPid(filepath.Join(dir, "owner"))
		if alive(owner) || owner == 0 && young(dir) { // 0: being made
			continue
		}
		if pid := readPid(filepath.Join(dir, "sshd.pid")); alive(pid) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(cmdline), dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.RemoveAll(dir)
	}
}

func readPid(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func young(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && time.Since(fi.ModTime()) < time.Minute
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

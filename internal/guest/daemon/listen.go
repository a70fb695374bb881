package guest

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// CodeUnauthorized is the error code of a request that lacks the sandbox's
// secret.
const CodeUnauthorized = "unauthorized"

// Listener is where the guest answers, parsed from its --listen address.
type Listener struct {
	// Network is "unix", "tcp" or "vsock".
	Network string
	// Addr is the socket's path, the TCP host:port, or the vsock port.
	Addr string
}

// ParseListen reads "unix:PATH", "tcp:HOST:PORT" or "vsock:PORT".
func ParseListen(s string) (Listener, error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Listener{}, fmt.Errorf("listen address %q: want unix:PATH, tcp:HOST:PORT or vsock:PORT", s)
	}
	switch network {
	case "unix", "tcp":
	case "vsock":
		if _, err := strconv.ParseUint(addr, 10, 32); err != nil {
			return Listener{}, fmt.Errorf("listen address %q: vsock port must be a number", s)
		}
	default:
		return Listener{}, fmt.Errorf("listen address %q: unknown network %q (unix, tcp or vsock)", s, network)
	}
	return Listener{Network: network, Addr: addr}, nil
}

// NeedsSecret says whether requests arriving here must carry the secret:
// anything on a network may come from someone other than the host.
func (l Listener) NeedsSecret() bool { return l.Network == "tcp" }

// Listen opens the listener.
func (l Listener) Listen() (net.Listener, error) {
	switch l.Network {
	case "unix":
		return Listen(l.Addr)
	case "vsock":
		port, _ := strconv.ParseUint(l.Addr, 10, 32)
		return ListenVsock(uint32(port))
	}
	nl, err := net.Listen(l.Network, l.Addr)
	if err != nil {
		return nil, fmt.Errorf("guest: listen: %w", err)
	}
	return nl, nil
}

// requireSecret answers 401 to every request that does not carry secret in
// SecretHeader, and removes the header from the others so that it never
// reaches a proxied service.
func requireSecret(secret string, next http.Handler) http.Handler {
	want := []byte(secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get(SecretHeader))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: &Error{Code: CodeUnauthorized, Message: "this guest needs its sandbox's secret"}})
			return
		}
		r.Header.Del(SecretHeader)
		next.ServeHTTP(w, r)
	})
}

// ListenVsock listens on a vsock port of this virtual machine, any CID.
func ListenVsock(port uint32) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("guest: vsock socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: port}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("guest: vsock bind port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("guest: vsock listen: %w", err)
	}
	return &vsockListener{f: os.NewFile(uintptr(fd), "vsock-listener"), addr: vsockAddr{unix.VMADDR_CID_ANY, port}}, nil
}

// vsockListener accepts vsock connections through the runtime's poller.
type vsockListener struct {
	f    *os.File
	addr vsockAddr
	once sync.Once
}

func (l *vsockListener) Accept() (net.Conn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var sa unix.Sockaddr
	rerr := rc.Read(func(fd uintptr) bool {
		nfd, sa, err = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return !errors.Is(err, unix.EAGAIN)
	})
	if rerr != nil {
		return nil, fmt.Errorf("guest: vsock accept: %w", net.ErrClosed)
	}
	if err != nil {
		return nil, fmt.Errorf("guest: vsock accept: %w", err)
	}
	remote := vsockAddr{}
	if vm, ok := sa.(*unix.SockaddrVM); ok {
		remote = vsockAddr{vm.CID, vm.Port}
	}
	return &vsockConn{File: os.NewFile(uintptr(nfd), "vsock"), local: l.addr, remote: remote}, nil
}

func (l *vsockListener) Close() error {
	var err error
	l.once.Do(func() { err = l.f.Close() })
	return err
}

func (l *vsockListener) Addr() net.Addr { return l.addr }

// ReadSecret returns the secret the guest requires: the content of file,
// or else the environment's AGENTBOX_GUEST_SECRET, which is then removed so
// that no command the guest runs inherits it.
func ReadSecret(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("guest: secret: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	s := os.Getenv(SecretEnv)
	os.Unsetenv(SecretEnv)
	return s, nil
}

// SecretEnv is the environment variable a guest may take its secret from
// when no secret file is given (a Kubernetes Secret, for one).
const SecretEnv = "AGENTBOX_GUEST_SECRET"

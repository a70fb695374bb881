package daemon

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/serialmux"
	"github.com/agentbox/agentbox/internal/guest/vsock"
)

// Listen opens where: a unix socket (see ListenUnix), a vsock port of this
// virtual machine, a virtio-serial port multiplexed by serialmux, or a TCP
// address.
func Listen(where guest.Listener) (net.Listener, error) {
	switch where.Network {
	case "unix":
		return ListenUnix(where.Addr)
	case "vsock":
		port, err := strconv.ParseUint(where.Addr, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("guest: vsock port %q: %w", where.Addr, err)
		}
		l, err := vsock.Listen(uint32(port))
		if err != nil {
			return nil, fmt.Errorf("guest: %w", err)
		}
		return l, nil
	case "serial":
		l, err := serialmux.Listen(where.Addr)
		if err != nil {
			return nil, fmt.Errorf("guest: %w", err)
		}
		return l, nil
	}
	nl, err := net.Listen(where.Network, where.Addr)
	if err != nil {
		return nil, fmt.Errorf("guest: listen: %w", err)
	}
	return nl, nil
}

// ListenUnix creates the unix socket at path, replacing a stale one.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("guest: remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("guest: listen: %w", err)
	}
	// The socket's directory is private on the host; inside the sandbox every
	// process has the agent's uid anyway.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("guest: chmod socket: %w", err)
	}
	return l, nil
}

// requireSecret answers 401 to every request that does not carry secret in
// guest.SecretHeader, and removes the header from the others so that it
// never reaches a proxied service.
func requireSecret(secret string, next http.Handler) http.Handler {
	want := []byte(secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get(guest.SecretHeader))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeJSON(w, http.StatusUnauthorized, guest.ErrorBody{Error: guest.Errorf(guest.CodeUnauthorized, "this guest needs its sandbox's secret")})
			return
		}
		r.Header.Del(guest.SecretHeader)
		next.ServeHTTP(w, r)
	})
}

// ReadSecret returns the secret the guest requires: the content of file,
// or else the environment's guest.SecretEnv, which is then removed so that
// no command the guest runs inherits it.
func ReadSecret(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("guest: secret: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	s := os.Getenv(guest.SecretEnv)
	os.Unsetenv(guest.SecretEnv)
	return s, nil
}

package guest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

func TestHandshakeRefusesOtherProtocol(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"status":"ok","protocol":99,"version":"v9"}`))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	_, err = guest.NewClient(sock).Handshake(context.Background())
	if !errors.Is(err, guest.ErrProtocol) || !strings.Contains(err.Error(), "protocol 99") {
		t.Fatalf("err = %v, want ErrProtocol naming protocol 99", err)
	}
}

func TestGuestDiesMidCall(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	_, err = guest.NewClient(sock).Exec(context.Background(), guest.Shell("true"))
	if !errors.Is(err, guest.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

package guest_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

func TestParseListen(t *testing.T) {
	for in, want := range map[string]guest.Listener{
		"unix:/run/agentbox/guest.sock": {Network: "unix", Addr: "/run/agentbox/guest.sock"},
		"tcp:0.0.0.0:7000":              {Network: "tcp", Addr: "0.0.0.0:7000"},
		"vsock:1024":                    {Network: "vsock", Addr: "1024"},
	} {
		got, err := guest.ParseListen(in)
		if err != nil || got != want {
			t.Errorf("ParseListen(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "tcp:", "udp:1.2.3.4:5", "vsock:x", "/run/agentbox/guest.sock"} {
		if _, err := guest.ParseListen(bad); err == nil {
			t.Errorf("ParseListen(%q) succeeded", bad)
		}
	}
	if (guest.Listener{Network: "tcp"}).NeedsSecret() != true || (guest.Listener{Network: "unix"}).NeedsSecret() {
		t.Error("only tcp needs the secret")
	}
}

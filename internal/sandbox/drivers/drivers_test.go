package drivers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
)

func TestUnknownDriverNamesTheKnownOnes(t *testing.T) {
	_, err := drivers.Open("firecracker", drivers.Options{})
	if !errors.Is(err, drivers.ErrUnknown) || !strings.Contains(err.Error(), `"firecracker"`) || !strings.Contains(err.Error(), "docker") {
		t.Fatalf("err = %v, want ErrUnknown naming the driver asked for and the known ones", err)
	}
}

func TestOpenDocker(t *testing.T) {
	cfg := docker.Config{Host: "unix:///nonexistent/docker.sock", Image: "x", GuestBinary: "/nonexistent", StateDir: t.TempDir(), Instance: "x"}
	// The driver's own checks run: a missing guest binary is its error.
	if _, err := drivers.Open("", drivers.Options{Docker: cfg}); err == nil || !strings.Contains(err.Error(), "docker driver: guest binary") {
		t.Fatalf("err = %v, want the docker driver's guest binary check", err)
	}
	cfg.Network = "host"
	if _, err := drivers.Open("docker", drivers.Options{Docker: cfg}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("err = %v, want ErrInvalidSpec for a host network", err)
	}
}

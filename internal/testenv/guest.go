package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildGuest builds the static agentbox binary that sandboxes run as their
// guest into a temporary directory, for a package's TestMain. The returned
// cleanup removes it.
func BuildGuest() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "abt")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "agentbox")
	cmd := exec.Command("go", "build", "-o", path, "github.com/agentbox/agentbox/cmd/agentbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build guest binary: %w\n%s", err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// GuestBinaryEnv names, for a test binary run again as a child process,
// the guest binary its parent built: see MainWithGuest.
const GuestBinaryEnv = "AGENTBOX_TEST_GUEST_BINARY"

// Image is the sandbox image tests use: AGENTBOX_IMAGE or the default.
func Image() string {
	if ref := os.Getenv("AGENTBOX_IMAGE"); ref != "" {
		return ref
	}
	return "agentbox-sandbox:latest"
}

// MainWithGuest is a package's TestMain for tests that start sandboxes: it
// removes what killed test runs left behind (ReapStale), builds the guest
// binary, stores its path in *path, runs the tests, removes the binary
// and stops the PostgreSQL server the tests may have started (StopPostgres).
//
// A test that runs its own binary again as a child process gives the child
// the binary's path in GuestBinaryEnv, and the child builds none.
func MainWithGuest(m interface{ Run() int }, path *string) {
	if bin := os.Getenv(GuestBinaryEnv); bin != "" {
		*path = bin
		os.Exit(m.Run())
	}
	ReapStale()
	bin, cleanup, err := BuildGuest()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*path = bin
	code := m.Run()
	cleanup()
	StopPostgres()
	os.Exit(code)
}

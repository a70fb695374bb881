package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

var guestBinary string

func TestMain(m *testing.M) { testenv.MainWithGuest(m, &guestBinary) }

// newDriver returns a driver on the test engine with a short state dir.
func newDriver(t *testing.T, mod ...func(*docker.Config)) *docker.Driver {
	t.Helper()
	testenv.DockerWithImage(t)
	return openDriver(t, mod...)
}

// openDriver returns a driver with a short state dir, on the engine mod
// names (Config.Host) or DOCKER_HOST's, without checking it.
func openDriver(t *testing.T, mod ...func(*docker.Config)) *docker.Driver {
	t.Helper()
	state, err := os.MkdirTemp("", "abs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	def := config.Default().Sandbox
	cfg := docker.Config{
		Image:       imageRef(),
		Defaults:    sandbox.Limits{MemoryBytes: def.MemoryBytes, NanoCPUs: def.NanoCPUs, PidsLimit: def.PidsLimit},
		GuestBinary: guestBinary,
		StateDir:    state,
		Instance:    "test-" + filepath.Base(state),
	}
	for _, m := range mod {
		m(&cfg)
	}
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func imageRef() string { return testenv.Image() }

// stateOf is the Docker driver's State in s's handle.
func stateOf(t *testing.T, s sandbox.Sandbox) docker.State {
	t.Helper()
	st, err := docker.StateOf(s.Handle())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newDriver(t))
}

func TestContainerIsLockedDown(t *testing.T) {
	d := newDriver(t)
	// Bound at create: a late bind records the job in bound.json, as labels
	// cannot change.
	s, err := d.Create(context.Background(), sandbox.Spec{Binding: &sandbox.Binding{JobID: "job-42"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(context.Background())
	info, err := d.Client().ContainerInspect(context.Background(), stateOf(t, s).Ref)
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	checks := map[string]bool{
		"network none":         string(hc.NetworkMode) == "none",
		"all caps dropped":     len(hc.CapDrop) == 1 && strings.EqualFold(hc.CapDrop[0], "ALL") && len(hc.CapAdd) == 0,
		"no-new-privileges":    strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges"),
		"read-only rootfs":     hc.ReadonlyRootfs,
		"init":                 hc.Init != nil && *hc.Init,
		"not privileged":       !hc.Privileged,
		"2 GiB memory":         hc.Memory == 2<<30 && hc.MemorySwap == 2<<30,
		"1 CPU":                hc.NanoCPUs == 1e9,
		"512 pids":             hc.PidsLimit != nil && *hc.PidsLimit == 512,
		"tmpfs /tmp and home":  hc.Tmpfs["/tmp"] != "" && hc.Tmpfs["/home/agent"] != "",
		"own uid":              ownUID(info.Config.User, info.Config.Labels[docker.LabelUID]),
		"nofile":               ulimit(hc.Ulimits, "nofile") == 1024,
		"agentbox label":       info.Config.Labels[docker.LabelManaged] == "true",
		"job label":            info.Config.Labels[docker.LabelJob] == "job-42",
		"no published ports":   len(hc.PortBindings) == 0,
		"guest mount readonly": guestMountReadOnly(info.Mounts),
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: not so (host config %+v)", name, hc)
		}
	}
}

// ownUID reports whether user is "uid:uid" for the uid of the label, in
// the default range of sandbox uids.
func ownUID(user, label string) bool {
	uid, err := strconv.Atoi(label)
	return err == nil && user == label+":"+label && uid >= 200000 && uid <= 299999
}

func ulimit(ls []*container.Ulimit, name string) int64 {
	for _, l := range ls {
		if l.Name == name && l.Soft == l.Hard {
			return l.Hard
		}
	}
	return -1
}

func guestMountReadOnly(ms []container.MountPoint) bool {
	for _, m := range ms {
		if m.Destination == docker.GuestPath {
			return !m.RW
		}
	}
	return false
}

func TestMissingImage(t *testing.T) {
	d := newDriver(t, func(c *docker.Config) { c.Image = "agentbox-no-such-image:never" })
	_, err := d.Create(context.Background(), sandbox.Spec{})
	if !errors.Is(err, sandbox.ErrImageMissing) || !strings.Contains(err.Error(), "agentbox image build") {
		t.Fatalf("err = %v, want ErrImageMissing with the fix", err)
	}
	assertNoLeak(t, d)
}

func TestUnsafeSpecsRefused(t *testing.T) {
	d := newDriver(t)
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "f"), nil, 0o644)
	for name, spec := range map[string]sandbox.Spec{
		"host network":       {Network: "host"},
		"container network":  {Network: "container:abc"},
		"negative pids":      {Limits: sandbox.Limits{PidsLimit: -1}},
		"too few pids":       {Limits: sandbox.Limits{PidsLimit: 16}}, // the guest cannot start
		"negative memory":    {Limits: sandbox.Limits{MemoryBytes: -1}},
		"root as workspace":  {Binding: &sandbox.Binding{WorkspaceDir: "/"}},
		"relative workspace": {Binding: &sandbox.Binding{WorkspaceDir: "proj"}},
		"missing workspace":  {Binding: &sandbox.Binding{WorkspaceDir: "/no/such/dir"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := d.Create(context.Background(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
		})
	}
	assertNoLeak(t, d)
}

func TestCallerWorkspaceNotReowned(t *testing.T) {
	d := newDriver(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "mine"), []byte("x"), 0o600)
	before, _ := os.Stat(ws)
	s, err := sandbox.Start(context.Background(), d, sandbox.Spec{}, sandbox.Binding{WorkspaceDir: ws})
	if err != nil {
		t.Fatal(err)
	}
	s.Destroy(context.Background())
	after, _ := os.Stat(ws)
	if before.Mode() != after.Mode() || !sameOwner(before, after) {
		t.Errorf("caller's workspace changed: %v -> %v", before.Mode(), after.Mode())
	}
}

func sameOwner(a, b os.FileInfo) bool {
	sa, sb := a.Sys().(*syscall.Stat_t), b.Sys().(*syscall.Stat_t)
	return sa.Uid == sb.Uid && sa.Gid == sb.Gid
}

func TestRemoveRefusesForeignPaths(t *testing.T) {
	d := newDriver(t)
	victim := t.TempDir()
	st, _ := json.Marshal(docker.State{StateDir: victim, WorkspaceDir: victim, OwnsWorkspace: true})
	h := sandbox.Handle{ID: "x", Driver: "docker", Version: sandbox.HandleVersion, State: st}
	if err := d.Remove(context.Background(), h); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("err = %v, want ErrInvalidSpec", err)
	}
	// A v1 handle, its fields at the top level, is read the same way.
	var v1 sandbox.Handle
	if err := json.Unmarshal([]byte(`{"id":"x","driver":"docker","state_dir":"`+victim+`","workspace_dir":"`+victim+`","owns_workspace":true}`), &v1); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(context.Background(), v1); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("v1 handle: err = %v, want ErrInvalidSpec", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("a directory outside the state dir was removed: %v", err)
	}
}

func TestGuestThatNeverAnswers(t *testing.T) {
	// A static binary that exits at once stands in for a broken guest:
	// Create must say so promptly and leave nothing behind.
	src := filepath.Join(t.TempDir(), "main.go")
	os.WriteFile(src, []byte("package main\nimport (\"fmt\"; \"os\")\nfunc main() { fmt.Println(\"broken guest\"); os.Exit(3) }\n"), 0o644)
	bin := filepath.Join(t.TempDir(), "broken")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	d := newDriver(t, func(c *docker.Config) { c.GuestBinary = bin })
	begin := time.Now()
	_, err := d.Create(context.Background(), sandbox.Spec{})
	if err == nil || !strings.Contains(err.Error(), "guest exited before answering: exit code 3") || !strings.Contains(err.Error(), "broken guest") {
		t.Fatalf("err = %v, want the exit code and the guest's logs", err)
	}
	if d := time.Since(begin); d > time.Minute {
		t.Errorf("took %v to notice", d)
	}
	assertNoLeak(t, d)
}

func TestEngineUnavailable(t *testing.T) {
	d, err := docker.New(docker.Config{Host: "unix:///nonexistent/docker.sock", Image: "x", GuestBinary: guestBinary, StateDir: t.TempDir(), Instance: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Create(ctx, sandbox.Spec{}); !errors.Is(err, sandbox.ErrEngineUnavailable) {
		t.Errorf("create: %v, want ErrEngineUnavailable", err)
	}
	if _, err := d.List(ctx); !errors.Is(err, sandbox.ErrEngineUnavailable) {
		t.Errorf("list: %v, want ErrEngineUnavailable", err)
	}
}

func TestDynamicGuestBinaryRefused(t *testing.T) {
	err := docker.CheckGuestBinary("/bin/sh")
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("err = %v, want a dynamic-linking error naming the fix", err)
	}
	if err := docker.CheckGuestBinary(guestBinary); err != nil {
		t.Fatalf("static build refused: %v", err)
	}
}

func assertNoLeak(t *testing.T, d *docker.Driver) {
	t.Helper()
	hs, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 0 {
		t.Errorf("leaked sandboxes: %+v", hs)
	}
	entries, _ := os.ReadDir(d.StateDir())
	for _, e := range entries {
		if e.Name() != ".disks" { // the loop disks' templates stay
			t.Errorf("leaked sandbox directory: %s", e.Name())
		}
	}
}

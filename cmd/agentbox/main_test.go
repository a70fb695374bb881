package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/testenv"
)

var guestBinary string

func TestMain(m *testing.M) { testenv.MainWithGuest(m, &guestBinary) }

// run executes the CLI in-process with args and returns its output.
func run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	root := newRootCmd()
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs(args)
	err = root.ExecuteContext(ctx)
	return o.String(), e.String(), err
}

func TestEveryCommandExplainsItself(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" || (c.HasParent() && c.Long == "" && !c.HasSubCommands()) {
			t.Errorf("%q lacks a short or long description", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	out, _, err := run(context.Background(), "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"exec", "image", "doctor", "bench", "version"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("--help does not list %s", sub)
		}
	}
	// The commands agentbox starts itself are not for people.
	for _, sub := range []string{"guest", "highlight"} {
		if strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("--help lists %s:\n%s", sub, out)
		}
	}
}

func TestBadInputIsAClearError(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"exec", "--memory", "lots", "true"}, want: "--memory"},
		{args: []string{"exec", "--cpus", "-1", "true"}, want: "--cpus"},
		{args: []string{"exec", "--env", "NOEQUALS", "true"}, want: "KEY=VALUE"},
		{args: []string{"exec", "--workspace", "/no/such/dir", "true"}, want: "not a directory"},
		{args: []string{"exec"}, want: "agentbox exec takes COMMAND [ARG...]; got none"},
		{args: []string{"doctor"}, env: map[string]string{"AGENTBOX_SANDBOX_PIDS": "many"}, want: "AGENTBOX_SANDBOX_PIDS"},
		{args: []string{"exec", "--driver", "firecracker", "true"}, want: `unknown sandbox driver "firecracker": known drivers are docker`},
		{args: []string{"exec", "true"}, env: map[string]string{"AGENTBOX_DRIVER": "firecracker"}, want: `"firecracker": known drivers are docker`},
		// The flag wins over the environment.
		{args: []string{"exec", "--driver", "nope", "true"}, env: map[string]string{"AGENTBOX_DRIVER": "docker"}, want: `"nope"`},
		// The Docker driver refuses networks that share a namespace.
		{args: []string{"exec", "true"}, env: map[string]string{"AGENTBOX_SANDBOX_NETWORK": "host", "AGENTBOX_GUEST_BINARY": guestBinary}, want: "are refused"},
		{args: []string{"exec", "--network", "container:x", "true"}, env: map[string]string{"AGENTBOX_GUEST_BINARY": guestBinary}, want: "are refused"},
		{args: []string{"exec", "true"}, env: map[string]string{"AGENTBOX_GUEST_TRANSPORT": "carrier-pigeon", "AGENTBOX_GUEST_BINARY": guestBinary}, want: "guest transport"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, _, err := run(context.Background(), tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestMissingTierExits2: a tier that cannot run here is refused, saying
// why, with exit status 2; never run under another.
func TestMissingTierExits2(t *testing.T) {
	t.Setenv("AGENTBOX_GUEST_BINARY", guestBinary)
	t.Setenv("PATH", t.TempDir()) // no QEMU: the microvm tier cannot run
	for _, args := range [][]string{
		{"exec", "--isolation", "microvm", "true"},
		{"exec", "--isolation", "kvm", "true"},
	} {
		_, _, err := run(context.Background(), args...)
		if err == nil || exitCodeOf(err) != 2 || !strings.Contains(err.Error(), "isolation") {
			t.Errorf("%v: err = %v (exit %d), want exit 2 naming the isolation", args, err, exitCodeOf(err))
		}
	}
	if _, _, err := run(context.Background(), "exec", "--isolation", "microvm", "true"); err == nil ||
		!strings.Contains(err.Error(), "no qemu-system-x86_64: apt-get install qemu-system-x86") {
		t.Errorf("err = %v, want it to say QEMU is missing and how to install it", err)
	}
}

func TestDoctorWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := run(ctx, "doctor")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("err = %v, want exit 1", err)
	}
	for _, want := range []string{"FAIL  engine", "fix: sudo ./scripts/setup.sh", "fix: agentbox image build", "ok    data dir"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	// --data-dir wins over AGENTBOX_DATA_DIR.
	dir := filepath.Join(t.TempDir(), "other")
	if out, _, _ := run(ctx, "doctor", "--data-dir", dir); !strings.Contains(out, "data dir      "+dir+" is writable") {
		t.Errorf("doctor --data-dir %s:\n%s", dir, out)
	}
}

// sandboxEnv points the CLI at the test engine with its own instance label.
func sandboxEnv(t *testing.T) (instance string) {
	t.Helper()
	testenv.DockerWithImage(t)
	data, err := os.MkdirTemp("", "abc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	instance = "clitest-" + filepath.Base(data)
	t.Setenv("AGENTBOX_DATA_DIR", data)
	t.Setenv("AGENTBOX_INSTANCE", instance)
	t.Setenv("AGENTBOX_GUEST_BINARY", guestBinary)
	return instance
}

func TestExecRunsInAFreshSandbox(t *testing.T) {
	instance := sandboxEnv(t)
	out, _, err := run(context.Background(), "exec", "-q", "-e", "WHO=world", "echo hello $WHO from $(id -un); echo oops >&2; exit 3")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("err = %v, want the command's exit code 3", err)
	}
	if out != "hello world from agent\n" {
		t.Errorf("stdout %q", out)
	}
	assertNoSandboxes(t, instance)
}

// TestDriverFlagWinsOverEnv: --driver names the driver over AGENTBOX_DRIVER.
func TestDriverFlagWinsOverEnv(t *testing.T) {
	instance := sandboxEnv(t)
	t.Setenv("AGENTBOX_DRIVER", "nope")
	out, _, err := run(context.Background(), "exec", "-q", "--driver", "docker", "echo ok")
	if err != nil || out != "ok\n" {
		t.Fatalf("exec --driver docker: %q, %v", out, err)
	}
	assertNoSandboxes(t, instance)
}

func TestExecInterruptRemovesSandbox(t *testing.T) {
	instance := sandboxEnv(t)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := run(ctx, "exec", "-q", "--workspace", ws, "touch started; sleep 300")
		done <- err
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel() // what Ctrl-C does through signal.NotifyContext
	select {
	case err := <-done:
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 130 {
			t.Errorf("err = %v, want exit 130", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec did not return after interrupt")
	}
	assertNoSandboxes(t, instance)
	if _, err := os.Stat(filepath.Join(ws, "started")); err != nil {
		t.Errorf("the caller's workspace lost its file: %v", err)
	}
}

func assertNoSandboxes(t *testing.T, instance string) {
	t.Helper()
	cli := testenv.Docker(t)
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "io.agentbox.instance="+instance))})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Errorf("%d sandbox containers left behind", len(cs))
	}
	entries, _ := os.ReadDir(filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "sandboxes"))
	for _, e := range entries {
		if e.Name() != ".disks" { // the loop disks' templates stay
			t.Errorf("sandbox directory left behind: %s", e.Name())
		}
	}
}

package image

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/testenv"
)

// toolCheck runs in the image as the agent; each line must succeed.
// xdotool needs a display even for `version`, hence xvfb-run.
const toolCheck = `set -e
test "$(id -u):$(id -g)" = 1000:1000 && test "$HOME" = /home/agent && test "$PWD" = /workspace
jupyter server --version
jupyter notebook --version
tsc --version
node --version
python3 -c 'import flask, requests, numpy, pandas, pytest, ipykernel'
Xvfb -help >/dev/null 2>&1
xvfb-run -a xdotool version
x11vnc -version
websockify --help >/dev/null
scrot --version
git --version && curl --version >/dev/null && gcc --version >/dev/null && make --version >/dev/null
test -f /usr/share/novnc/vnc.html && test -d /run/agentbox && test -d /opt/agentbox
echo ALL-TOOLS-OK
`

// coreCheck runs in the core image: what a coding job needs is there, the
// desktop layer is not.
const coreCheck = `set -e
test "$(id -u):$(id -g)" = 1000:1000 && test "$HOME" = /home/agent && test "$PWD" = /workspace
tsc --version && node --version && npm --version >/dev/null
python3 -c 'import flask, requests, numpy, pandas, pytest'
git --version && curl --version >/dev/null && gcc --version >/dev/null && make --version >/dev/null
! command -v Xvfb && ! command -v jupyter
test -d /run/agentbox && test -d /opt/agentbox
echo CORE-OK
`

// TestSandboxImage needs Docker. It builds the configured image if it is
// not current (minutes; a no-op otherwise), then checks that a container of
// it, run the way sandboxes run (uid 1000, no network, read-only root), has
// every tool the design promises.
func TestSandboxImage(t *testing.T) {
	cli := testenv.Docker(t)
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ref := cfg.Sandbox.Image
	var progress bytes.Buffer
	res, err := Build(t.Context(), cli, Options{Ref: ref, From: FromAuto, Progress: &progress})
	if err != nil {
		t.Fatalf("build %s: %v\n%s", ref, err, tail(progress.String(), 4000))
	}
	t.Logf("image %s built=%t id=%s", ref, res.Built, res.ID)
	st, err := Inspect(t.Context(), cli, ref)
	if err != nil || !st.Present || !st.Current || st.ID != res.ID {
		t.Fatalf("Inspect(%s) = %+v, %v; want present and current with id %s", ref, st, err, res.ID)
	}
	code, out := runInImage(t, cli, ref, toolCheck)
	if code != 0 || !strings.Contains(out, "ALL-TOOLS-OK") {
		t.Fatalf("tool check exited %d:\n%s", code, out)
	}
	for _, want := range []string{"Version 4.", "v18.", "xdotool version", "x11vnc: 0.9", "scrot version"} {
		if !strings.Contains(out, want) {
			t.Errorf("tool check output lacks %q:\n%s", want, out)
		}
	}
	core := CoreRef(ref)
	if code, out := runInImage(t, cli, core, coreCheck); code != 0 || !strings.Contains(out, "CORE-OK") {
		t.Fatalf("core check in %s exited %d:\n%s", core, code, out)
	}
}

// runInImage runs script with sh in a throwaway container of ref, the way
// sandboxes run, and returns its exit code and output.
func runInImage(t *testing.T, cli *client.Client, ref, script string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	created, err := cli.ContainerCreate(ctx,
		&container.Config{Image: ref, User: "1000:1000", Cmd: []string{"sh", "-c", script}},
		&container.HostConfig{
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			Tmpfs:          map[string]string{"/tmp": "", "/home/agent": "uid=1000,gid=1000"},
		}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	})
	waitc, errc := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	var code int64
	select {
	case w := <-waitc:
		code = w.StatusCode
	case err := <-errc:
		t.Fatalf("wait for container: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return code, out.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

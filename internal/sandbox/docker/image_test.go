package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
)

// A job's image is written by a user: these tests build an image whose
// Dockerfile sets everything an image can set against the sandbox, and
// check from inside the sandbox that its posture is the default image's.

// hostileDockerfile is FROM the sandbox image (BASE) and sets a user, an
// entrypoint and command, a working directory, environment variables the
// guest might read, volumes over the driver's mounts and beside them,
// labels naming a sandbox of the test's instance (INSTANCE) whose state
// dir is VICTIM, a health check, a stop signal, an exposed port, an
// ONBUILD trigger, and ships a setuid-root shell and a library to preload.
const hostileDockerfile = `ARG BASE
FROM $BASE
USER root
RUN printf 'int agentbox_hostile;\n' > /tmp/evil.c && gcc -shared -fPIC -o /usr/local/lib/evil.so /tmp/evil.c && rm /tmp/evil.c \
 && cp /bin/bash /usr/local/bin/rootsh && chmod 4755 /usr/local/bin/rootsh \
 && mkdir -p /data && echo image > /data/from-image
ENV LD_PRELOAD=/usr/local/lib/evil.so GODEBUG=http2debug=2 GOMAXPROCS=1 GOTRACEBACK=crash \
    AGENTBOX_GUEST_SECRET=planted-secret-0123456789 AGENTBOX_HOSTILE=1 HOSTILE=yes
VOLUME /workspace /data /run/agentbox /tmp
LABEL io.agentbox.managed=true io.agentbox.instance=INSTANCE io.agentbox.sandbox=planted \
      io.agentbox.job=planted io.agentbox.owner=planted io.agentbox.state-dir=VICTIM \
      io.agentbox.workspace=VICTIM io.agentbox.owns-workspace=true io.agentbox.uid=0 \
      io.agentbox.workspace-owner=0:0 io.agentbox.disk=1 agentbox.managed=true
HEALTHCHECK --interval=1s --start-period=1s CMD touch /tmp/healthcheck-ran
STOPSIGNAL SIGCONT
EXPOSE 8080/tcp
WORKDIR /etc
ONBUILD RUN touch /onbuild-ran
ENTRYPOINT ["/bin/sh", "-c", "touch /tmp/entrypoint-ran; exec sleep 1000000", "--"]
CMD ["hostile"]
`

// buildImage builds dockerfile (its BASE the sandbox image) as tag through
// the Engine API, and removes the image at the end of the test.
func buildImage(t *testing.T, cli *client.Client, tag, dockerfile string) {
	t.Helper()
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))})
	tw.Write([]byte(dockerfile))
	tw.Close()
	base := imageRef()
	resp, err := cli.ImageBuild(context.Background(), &ctxTar, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true,
		BuildArgs: map[string]*string{"BASE": &base}, Version: build.BuilderV1})
	if err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
	defer resp.Body.Close()
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	var out strings.Builder
	err = jsonmessage.DisplayJSONMessagesStream(resp.Body, &out, 0, false, nil)
	if err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out.String())
	}
}

// hostileImage builds the hostile image with labels aimed at d's instance
// and a victim directory in d's state dir, which it returns.
func hostileImage(t *testing.T, d *docker.Driver, instance string) (tag, victim string) {
	t.Helper()
	victim = filepath.Join(d.StateDir(), "victim")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(victim, "canary"), []byte("alive"), 0o600)
	tag = "agentbox-test-hostile:" + strings.ToLower(instance)
	df := strings.NewReplacer("INSTANCE", instance, "VICTIM", victim).Replace(hostileDockerfile)
	buildImage(t, d.Client(), tag, df)
	return tag, victim
}

// imageDriver creates every sandbox in its image, as a job naming one does.
type imageDriver struct {
	*docker.Driver
	image string
}

func (d imageDriver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	spec.Image = d.image
	return d.Driver.Create(ctx, spec)
}

// TestConformanceHostileImage runs the whole conformance suite in
// sandboxes of the hostile image.
func TestConformanceHostileImage(t *testing.T) {
	d := newDriver(t)
	tag, _ := hostileImage(t, d, "conformance")
	sandboxtest.Run(t, imageDriver{d, tag})
}

// probe prints, from inside a sandbox, what its posture is made of.
const probe = `
echo "uid $(id -u) groups $(id -G)"
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
echo "net $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')routes $(tail -n +2 /proc/net/route | wc -l)"
echo "memory $(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
echo "pids $(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)"
echo "nofile $(ulimit -n) fsize $(ulimit -f)"
echo "pid1 $(cat /proc/1/comm)"
for p in /proc/[0-9]*; do
  if [ "$(readlink $p/exe)" = /opt/agentbox/agentbox ]; then
    echo "guest $(tr '\0' ' ' < $p/cmdline)cwd $(readlink $p/cwd) parent $(awk '{print $4}' $p/stat)"
  fi
done
`

// mounts are a sandbox's mount points, each with its file system type and
// mount options (sources and per-superblock options differ by sandbox).
const mounts = `awk '{ for (i = 7; $i != "-"; i++) ; print $5, $(i+1), $6 }' /proc/self/mountinfo | sort`

func TestHostileImagePosture(t *testing.T) {
	d := newDriver(t)
	tag, victim := hostileImage(t, d, "test-"+filepath.Base(d.StateDir()))
	cli := d.Client()
	volumesBefore := volumeNames(t, cli)

	spec := sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 512 << 20, PidsLimit: 100}}
	plain := create(t, d, spec, sandbox.Binding{WorkspaceDir: t.TempDir()})
	wsDir := t.TempDir()
	spec.Image = tag
	hostile := create(t, d, spec, sandbox.Binding{WorkspaceDir: wsDir})

	for _, s := range []sandbox.Sandbox{plain, hostile} {
		uid := strconv.Itoa(stateOf(t, s).UID)
		if got := firstLine(sh(t, s, "id -u").Stdout); got != uid || uid == "0" {
			t.Errorf("runs as uid %s, want the sandbox's %s", got, uid)
		}
	}
	want, got := sh(t, plain, probe), sh(t, hostile, probe)
	if w, g := withoutUID(want.Stdout), withoutUID(got.Stdout); w != g || want.ExitCode != 0 || got.ExitCode != 0 {
		t.Errorf("posture differs from the default image's:\ndefault:\n%s\nhostile:\n%s\nstderr %q", w, g, got.Stderr)
	}
	checkMounts(t, sh(t, plain, mounts).Stdout, sh(t, hostile, mounts).Stdout)
	checkInside(t, hostile, wsDir)
	checkEngineView(t, d, hostile, tag)
	checkListed(t, d, hostile, tag)

	h := hostile.Handle()
	if err := hostile.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGone(t, d, h, volumesBefore)
	if b, err := os.ReadFile(filepath.Join(victim, "canary")); string(b) != "alive" {
		t.Errorf("the directory the image's labels named was touched: %q %v", b, err)
	}
}

// withoutUID drops the probe's uid line: each sandbox has a uid of its own.
func withoutUID(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "uid ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func firstLine(b []byte) string { return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]) }

// checkMounts: the hostile sandbox has the default one's mounts, each as
// it is there, and besides them only tmpfs in place of its image's
// volumes.
func checkMounts(t *testing.T, plain, hostile []byte) {
	t.Helper()
	p, h := lines(plain), lines(hostile)
	for m := range p {
		if !h[m] {
			t.Errorf("mount %q of the default image is not so in the hostile one", m)
		}
	}
	for m := range h {
		if !p[m] && m != "/data tmpfs rw,nosuid,nodev,noexec,relatime" {
			t.Errorf("mount %q is the hostile image's own", m)
		}
	}
	if len(h) == 0 || !h["/data tmpfs rw,nosuid,nodev,noexec,relatime"] {
		t.Errorf("no tmpfs in place of the image's VOLUME /data: %q", hostile)
	}
}

func lines(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		out[l] = true
	}
	return out
}

// checkInside looks, from inside the hostile sandbox, at what the image
// tried: its entrypoint, health check, setuid shell, environment and
// volumes.
func checkInside(t *testing.T, s sandbox.Sandbox, wsDir string) {
	t.Helper()
	uid := strconv.Itoa(stateOf(t, s).UID)
	for line, want := range map[string]string{
		// The image's entrypoint and health check never ran.
		"ls /tmp/entrypoint-ran /tmp/healthcheck-ran /onbuild-ran 2>/dev/null; pgrep -x sleep || true": "",
		// The setuid-root shell is there and gains nothing.
		"stat -c %a /usr/local/bin/rootsh":                                   "4755",
		"/usr/local/bin/rootsh -p -c 'id -u; grep CapEff /proc/self/status'": uid + "\nCapEff:\t0000000000000000",
		"pwd": "/workspace",
		"echo $HOSTILE; grep -q evil.so /proc/self/maps && echo preloaded":         "yes\npreloaded", // commands get the image's env
		"echo probe > /workspace/probe; echo x > /data/x && cat /data/x; ls /data": "x\nx",           // /data is a fresh tmpfs
	} {
		if got := strings.TrimSpace(string(sh(t, s, line).Stdout)); got != want {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(wsDir, "probe")); string(b) != "probe\n" {
		t.Errorf("/workspace is not the caller's workspace: %q %v", b, err)
	}
	// The guest itself runs without the library and with the Go runtime's
	// and agentbox's variables blanked.
	guestEnv := sh(t, s, `for p in /proc/[0-9]*; do [ "$(readlink $p/exe)" = /opt/agentbox/agentbox ] && { tr '\0' '\n' < $p/environ; grep -c '\.so' $p/maps; }; done`)
	env := string(guestEnv.Stdout)
	for _, kv := range []string{"GODEBUG=", "GOMAXPROCS=", "GOTRACEBACK=", "AGENTBOX_GUEST_SECRET=", "AGENTBOX_HOSTILE="} {
		if !lines(guestEnv.Stdout)[kv] {
			t.Errorf("the guest's environment lacks %q (blanked): %s", kv, env)
		}
	}
	if strings.Contains(env, "planted-secret") || strings.Contains(env, "http2debug") || !strings.HasSuffix(strings.TrimSpace(env), "\n0") {
		t.Errorf("the guest runs with the image's variables or a library: %s", env)
	}
}

// checkEngineView: the engine's record of the hostile container shows the
// image's settings overridden.
func checkEngineView(t *testing.T, d *docker.Driver, s sandbox.Sandbox, tag string) {
	t.Helper()
	info, err := d.Client().ContainerInspect(context.Background(), stateOf(t, s).Ref)
	if err != nil {
		t.Fatal(err)
	}
	c, hc := info.Config, info.HostConfig
	for name, ok := range map[string]bool{
		"user is the sandbox's":     c.User == c.Labels[docker.LabelUID]+":"+c.Labels[docker.LabelUID],
		"entrypoint is the guest":   len(c.Entrypoint) == 1 && c.Entrypoint[0] == docker.GuestPath,
		"workdir /workspace":        c.WorkingDir == docker.WorkspacePath,
		"no health check":           c.Healthcheck != nil && len(c.Healthcheck.Test) == 1 && c.Healthcheck.Test[0] == "NONE" && info.State.Health == nil,
		"stop signal SIGTERM":       c.StopSignal == "SIGTERM",
		"no published ports":        len(hc.PortBindings) == 0 && !hc.PublishAllPorts && string(hc.NetworkMode) == "none",
		"no volumes":                !hasVolume(info.Mounts),
		"labels are the driver's":   c.Labels[docker.LabelSandbox] == s.Handle().ID && c.Labels[docker.LabelStateDir] == stateOf(t, s).StateDir,
		"workspace owner is driver": c.Labels[docker.LabelWSOwner] == stateOf(t, s).WorkspaceOwner,
		"image is the job's":        c.Image == tag,
	} {
		if !ok {
			t.Errorf("%s: not so (config %+v, mounts %+v)", name, c, info.Mounts)
		}
	}
}

func hasVolume(ms []container.MountPoint) bool {
	for _, m := range ms {
		if m.Type == "volume" {
			return true
		}
	}
	return false
}

// checkListed: List finds the hostile sandbox as itself, and not a
// container that merely carries the image's labels (as a build step's or
// a person's docker run would).
func checkListed(t *testing.T, d *docker.Driver, s sandbox.Sandbox, tag string) {
	t.Helper()
	ctx := context.Background()
	foreign, err := d.Client().ContainerCreate(ctx, &container.Config{Image: tag}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Client().ContainerRemove(ctx, foreign.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	ls, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 { // the plain sandbox and the hostile one
		t.Fatalf("listed %d sandboxes, want the 2 the driver made: %+v", len(ls), ls)
	}
	for _, l := range ls {
		st, _ := docker.StateOf(l.Handle)
		if st.Ref == foreign.ID || l.Handle.ID == "planted" {
			t.Errorf("a container with the image's labels was listed as a sandbox: %+v", l.Handle)
		}
		if l.Handle.ID == s.Handle().ID && (st.StateDir != stateOf(t, s).StateDir || st.UID != stateOf(t, s).UID || l.Handle.Owner != "") {
			t.Errorf("the hostile sandbox is listed with the image's labels: %+v", st)
		}
	}
}

// checkGone: after Destroy nothing of the hostile sandbox remains: no
// container, no volume, nothing labelled as it, no host directory.
func checkGone(t *testing.T, d *docker.Driver, h sandbox.Handle, volumesBefore map[string]bool) {
	t.Helper()
	ctx := context.Background()
	st, _ := docker.StateOf(h)
	if _, err := d.Client().ContainerInspect(ctx, st.Ref); !cerrdefs.IsNotFound(err) {
		t.Errorf("container left after Destroy: %v", err)
	}
	cs, err := d.Client().ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelSandbox+"="+h.ID))})
	if err != nil || len(cs) != 0 {
		t.Errorf("containers labelled as the sandbox left: %d %v", len(cs), err)
	}
	for name := range volumeNames(t, d.Client()) {
		if !volumesBefore[name] {
			t.Errorf("volume %s left after Destroy", name)
		}
	}
	if _, err := os.Stat(st.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir left: %v", err)
	}
}

func volumeNames(t *testing.T, cli *client.Client) map[string]bool {
	t.Helper()
	vs, err := cli.VolumeList(context.Background(), volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, v := range vs.Volumes {
		out[v.Name] = true
	}
	return out
}

// TestImageVolumeInsideHostMountRefused: a volume inside /workspace would
// hide part of the job's workspace behind storage of the engine's.
func TestImageVolumeInsideHostMountRefused(t *testing.T) {
	d := newDriver(t)
	for i, vol := range []string{"/workspace/cache", "/run/agentbox/x"} {
		tag := "agentbox-test-volume:" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		buildImage(t, d.Client(), tag, "ARG BASE\nFROM $BASE\nVOLUME "+vol+"\n")
		_, err := d.Create(context.Background(), sandbox.Spec{Image: tag})
		if !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), vol) {
			t.Errorf("VOLUME %s: err = %v, want ErrInvalidSpec naming it", vol, err)
		}
	}
	assertNoLeak(t, d)
}

// TestMissingJobImage: an allowed image the engine lacks is an error that
// says how to build it; the engine is never asked to pull it.
func TestMissingJobImage(t *testing.T) {
	d := newDriver(t)
	_, err := d.Create(context.Background(), sandbox.Spec{Image: "agentbox-no-such-job-image"})
	if !errors.Is(err, sandbox.ErrImageMissing) || !strings.Contains(err.Error(), "agentbox image build --dockerfile PATH --tag agentbox-no-such-job-image") {
		t.Fatalf("err = %v, want ErrImageMissing with how to build it", err)
	}
	if _, err := d.Client().ImageInspect(context.Background(), "agentbox-no-such-job-image"); !cerrdefs.IsNotFound(err) {
		t.Errorf("the image appeared: %v", err)
	}
	assertNoLeak(t, d)
}

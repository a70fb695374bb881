package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Create starts a sandbox and waits until its guest answers. On any failure
// it removes whatever it made.
func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	if err := checkSpec(spec, d.Capabilities()); err != nil {
		return nil, err
	}
	img, err := d.inspectImage(ctx, d.imageOf(spec))
	if err != nil {
		return nil, err
	}
	b := sandbox.BindingOf(spec)
	if err := d.checkFree(d.cfg.StateDir, b.WorkspaceDir); err != nil {
		return nil, err
	}
	uid, err := d.allocUID(ctx)
	if err != nil {
		return nil, err
	}
	h, err := d.prepareDirs(spec, uid)
	if err != nil {
		d.freeUID(uid)
		return nil, err
	}
	// Known before the engine answers, so a create cut short by ctx is still
	// removed (by name) by the deferred Destroy; the TCP dialer finds the
	// container by it too.
	h.Ref = containerName(h.ID)
	s := d.newSandbox(h)
	s.bound = spec.Binding != nil
	if !s.bound {
		d.unbound.Store(h.ID, true) // before the engine lists it
	}
	defer func() {
		if err != nil {
			_ = s.Destroy(context.WithoutCancel(ctx))
		}
	}()
	if err := d.prepareWorkspace(&s.h, b.ManagedWorkspace); err != nil {
		return nil, err
	}
	cfg, hostCfg := d.containerConfig(spec, s.h, img)
	if err := d.fitEngine(ctx, hostCfg, h.StateDir); err != nil {
		return nil, err
	}
	created, err := d.cli.ContainerCreate(ctx, cfg, hostCfg, nil, nil, s.h.Ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) { // removed since inspectImage looked
			return nil, fmt.Errorf("create sandbox: image %s: %w", cfg.Image, sandbox.ErrImageMissing)
		}
		return nil, fmt.Errorf("create sandbox: %w", engineErr(err))
	}
	s.h.Ref = created.ID
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start sandbox: %w", engineErr(err))
	}
	if err := d.waitReady(ctx, s); err != nil {
		return nil, err
	}
	if err := lockRunDir(filepath.Join(h.StateDir, "run")); err != nil {
		return nil, err
	}
	if err := removeSecret(h.State); err != nil {
		return nil, err
	}
	s.watch()
	d.log.Debug("sandbox ready", "sandbox_id", h.ID, "job_id", h.JobID, "uid", uid)
	return s, nil
}

// prepareDirs makes the sandbox's state directory (private on the host) with
// the socket directory the guest writes to, the passwd and group files it
// sees, the guest's secret for the TCP transport, and the scratch workspace
// if the caller brought none.
func (d *Driver) prepareDirs(spec sandbox.Spec, uid int) (record, error) {
	b := sandbox.BindingOf(spec)
	h := record{ID: newID(), JobID: b.JobID, Owner: spec.Owner, Isolation: d.isolationLabel(),
		State: State{UID: uid, DiskBytes: d.limits(spec.Limits).DiskBytes, Transport: d.cfg.Transport}}
	h.StateDir = filepath.Join(d.cfg.StateDir, h.ID)
	if n := len(socketPath(h.StateDir)); n > maxSocketPath && h.Transport == sandbox.TransportUnix {
		return h, fmt.Errorf("%w: state dir %s gives a %d-byte socket path, over the %d Linux allows; use a shorter data dir", sandbox.ErrInvalidSpec, d.cfg.StateDir, n, maxSocketPath)
	}
	if err := os.MkdirAll(h.StateDir, 0o700); err != nil {
		return h, fmt.Errorf("sandbox state dir: %w", err)
	}
	h.WorkspaceDir, h.OwnsWorkspace = b.WorkspaceDir, b.WorkspaceDir == ""
	dirs := []string{filepath.Join(h.StateDir, "run")}
	if h.OwnsWorkspace {
		h.WorkspaceDir = filepath.Join(h.StateDir, "workspace")
		dirs = append(dirs, h.WorkspaceDir)
	} else if empty(h.WorkspaceDir) && !isRoot() {
		// A fresh directory made for the sandbox; one with content is the
		// caller's as it is, never re-owned.
		dirs = append(dirs, h.WorkspaceDir)
	}
	for _, dir := range dirs {
		if err := agentDir(dir, uid); err != nil {
			os.RemoveAll(h.StateDir)
			return h, err
		}
	}
	if err := writeAccounts(h.StateDir, uid); err != nil {
		os.RemoveAll(h.StateDir)
		return h, err
	}
	if err := writeSecret(&h.State); err != nil {
		os.RemoveAll(h.StateDir)
		return h, err
	}
	return h, nil
}

// prepareWorkspace puts the workspace under its disk quota, in the
// kernel where the host allows it, and gives it to the sandbox's uid (root
// only; Destroy gives a caller's workspace back to its owner).
func (d *Driver) prepareWorkspace(h *record, managed bool) error {
	if !isRoot() {
		return nil
	}
	if !h.OwnsWorkspace {
		o, err := ownerOf(h.WorkspaceDir)
		if err != nil {
			return fmt.Errorf("workspace owner: %w", err)
		}
		h.WorkspaceOwner = fmt.Sprintf("%d:%d", o.uid, o.gid)
	}
	switch d.quotaMode(h.WorkspaceDir, managed || h.OwnsWorkspace) {
	case QuotaLoop:
		return d.disks.Make(loopdisk.Disk{StateDir: h.StateDir, WorkspaceDir: h.WorkspaceDir, Bytes: h.DiskBytes, UID: h.UID, GID: h.UID})
	case QuotaXFS:
		if err := applyQuota(*h); err != nil {
			return fmt.Errorf("disk quota: %w", err)
		}
	}
	return chownTree(h.WorkspaceDir, owner{h.UID, h.UID})
}

// isolationLabel is the tier the driver's sandboxes record: "" for the
// container tier, as handles written before tiers have it.
func (d *Driver) isolationLabel() string {
	if iso := d.Capabilities().Isolation; iso != sandbox.IsolationContainer {
		return iso
	}
	return ""
}

func empty(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// checkSpec refuses what would weaken the sandbox.
func checkSpec(spec sandbox.Spec, c sandbox.Capabilities) error {
	if spec.Isolation != "" && spec.Isolation != c.Isolation {
		return fmt.Errorf("%w: this driver runs %s sandboxes, not %s", sandbox.ErrIsolationUnavailable, c.Isolation, spec.Isolation)
	}
	if err := c.CheckNetwork(spec.Network); err != nil {
		return err
	}
	l := spec.Limits
	if l.MemoryBytes < 0 || l.NanoCPUs < 0 || l.PidsLimit < 0 || l.DiskBytes < 0 || l.NoFile < 0 {
		return fmt.Errorf("%w: negative limits %+v", sandbox.ErrInvalidSpec, l)
	}
	if l.MemoryBytes != 0 && l.MemoryBytes < 16<<20 || l.PidsLimit != 0 && l.PidsLimit < 32 || l.DiskBytes != 0 && l.DiskBytes < 1<<20 || l.NoFile != 0 && l.NoFile < 16 {
		return fmt.Errorf("%w: limits too small to start a sandbox: %+v", sandbox.ErrInvalidSpec, l)
	}
	if err := sandbox.CheckBinding(sandbox.BindingOf(spec), false); err != nil {
		return err
	}
	return sandbox.CheckDisplay(spec)
}

// agentDir makes dir writable by the sandbox's uid: owned by it when we are
// root, else world-writable (its parent stays private to the host user).
func agentDir(dir string, uid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	if isRoot() {
		if err := os.Lchown(dir, uid, uid); err != nil {
			return fmt.Errorf("sandbox dir: %w", err)
		}
		return nil
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	return nil
}

func socketPath(stateDir string) string {
	return filepath.Join(stateDir, "run", guest.SocketName)
}

// imageOf is the image a spec's sandbox runs.
func (d *Driver) imageOf(spec sandbox.Spec) string {
	if spec.Image != "" {
		return spec.Image
	}
	return d.cfg.Image
}

// containerConfig is the container of the sandbox h for spec, in the
// image ic, whatever that image sets (neutralize).
func (d *Driver) containerConfig(spec sandbox.Spec, h record, ic imageConfig) (*container.Config, *container.HostConfig) {
	lim := d.limits(spec.Limits)
	network := spec.Network
	if network == "" {
		network = d.cfg.Network
	}
	uid := strconv.Itoa(h.UID)
	tmpfsOpts := "rw,nosuid,nodev,size=" + strconv.FormatInt(lim.MemoryBytes, 10)
	cfg := &container.Config{
		Image: ic.ref,
		User:  uid + ":" + uid,
		// The guest is the entrypoint: an image's own ENTRYPOINT would run
		// first, as the sandbox, before the guest listens.
		Entrypoint: guestCmd(spec, d.cfg.Display, h.State)[:1],
		Cmd:        guestCmd(spec, d.cfg.Display, h.State)[1:],
		Env:        envList(sandbox.BindingOf(spec).Env),
		WorkingDir: WorkspacePath,
		Hostname:   "sandbox",
		Labels: map[string]string{
			LabelManaged: "true", LabelInstance: d.cfg.Instance, LabelSandbox: h.ID, LabelJob: h.JobID, LabelOwner: h.Owner,
			LabelStateDir: h.StateDir, LabelWorkspace: h.WorkspaceDir, LabelOwnsWS: strconv.FormatBool(h.OwnsWorkspace),
			LabelUID: uid, LabelDisk: strconv.FormatInt(h.DiskBytes, 10), LabelWSOwner: h.WorkspaceOwner,
			LabelIsolation: h.Isolation,
		},
	}
	init := true
	pids := lim.PidsLimit
	if d.cfg.Runtime == RuntimeGVisor {
		pids += GVisorPidsHeadroom
	}
	hostCfg := &container.HostConfig{
		Runtime:        d.cfg.Runtime,
		NetworkMode:    container.NetworkMode(network),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges", seccompOpt}, // Create picks the engine's form
		ReadonlyRootfs: true,
		Init:           &init,
		Tmpfs: map[string]string{
			"/tmp":        tmpfsOpts,
			"/home/agent": tmpfsOpts + ",uid=" + uid + ",gid=" + uid + ",mode=0700",
		},
		Resources: container.Resources{
			Memory:     lim.MemoryBytes,
			MemorySwap: lim.MemoryBytes, // no swap: the limit is the limit
			NanoCPUs:   lim.NanoCPUs,
			PidsLimit:  &pids,
			Ulimits:    d.ulimits(h, lim),
		},
		// The guest's own logs are small; a cap keeps a process that writes to
		// the init's stdout from filling the host's disk.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: workspaceSource(h), Target: WorkspacePath},
			{Type: mount.TypeBind, Source: filepath.Join(h.StateDir, "run"), Target: GuestStateDir},
			{Type: mount.TypeBind, Source: d.cfg.GuestBinary, Target: GuestPath, ReadOnly: true},
			{Type: mount.TypeBind, Source: filepath.Join(h.StateDir, "passwd"), Target: "/etc/passwd", ReadOnly: true},
			{Type: mount.TypeBind, Source: filepath.Join(h.StateDir, "group"), Target: "/etc/group", ReadOnly: true},
		},
	}
	neutralize(ic, cfg, hostCfg, tmpfsOpts+",uid="+uid+",gid="+uid)
	return cfg, hostCfg
}

// ulimits bound every process's open files and, where only the watchdog
// keeps the disk quota, the size of any one file (EFBIG), so that no single
// write outruns the watchdog. Under a kernel quota a sparse file may be
// larger than the quota, as it takes no space.
func (d *Driver) ulimits(h record, lim sandbox.Limits) []*container.Ulimit {
	u := []*container.Ulimit{{Name: "nofile", Soft: lim.NoFile, Hard: lim.NoFile}}
	if d.modeOf(h) == QuotaWatch {
		c := fileCap(lim.DiskBytes)
		u = append(u, &container.Ulimit{Name: "fsize", Soft: c, Hard: c})
	}
	return u
}

// fileCap is the largest file a watched sandbox may write: its quota less
// room for the directories and inodes the watchdog also charges (1 MiB, or
// a sixteenth of a small quota), so that one file at its cap does not by
// itself put the sandbox over and get it stopped.
func fileCap(quota int64) int64 { return quota - min(quota/16, 1<<20) }

// workspaceSource is the host directory mounted at /workspace: the loop
// disk's mount when the sandbox has one, else the workspace itself.
func workspaceSource(h record) string {
	if loopdisk.Has(h.StateDir) {
		_, mnt := loopdisk.Paths(h.StateDir)
		return mnt
	}
	return h.WorkspaceDir
}

// limits are the spec's limits, the driver's defaults where it sets none.
func (d *Driver) limits(l sandbox.Limits) sandbox.Limits { return l.Or(d.cfg.Defaults) }

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// waitReady polls the guest's socket until it answers the handshake, the
// container exits, or the ready timeout passes.
func (d *Driver) waitReady(ctx context.Context, s *Sandbox) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	delay := time.Millisecond
	for try := 0; ; try++ {
		hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.g.Handshake(hctx)
		hcancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, guest.ErrProtocol) || errors.Is(err, guest.ErrUnsafeSocket) {
			return fmt.Errorf("sandbox %s: %w", s.h.ID, err)
		}
		if try%8 == 7 {
			if exited, why := d.exited(ctx, s.h.Ref); exited {
				return fmt.Errorf("sandbox %s: guest exited before answering: %s", s.h.ID, why)
			}
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("sandbox %s: guest did not answer within %v: %w", s.h.ID, d.cfg.ReadyTimeout, err)
			}
			return fmt.Errorf("sandbox %s: %w", s.h.ID, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Millisecond)
	}
}

// exited reports whether the container stopped, with the tail of its logs.
func (d *Driver) exited(ctx context.Context, ref string) (bool, string) {
	info, err := d.cli.ContainerInspect(ctx, ref)
	if err != nil || info.State == nil || info.State.Running {
		return false, ""
	}
	why := fmt.Sprintf("exit code %d", info.State.ExitCode)
	if info.State.Error != "" {
		why += ": " + info.State.Error
	}
	rc, err := d.cli.ContainerLogs(ctx, ref, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err == nil {
		defer rc.Close()
		var out capped.Buffer
		_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
		if out.Len() > 0 {
			why += "; logs:\n" + out.String()
		}
	}
	return true, why
}

// guestCmd is the sandbox's main process: the guest, told where to listen,
// the display size and the web base of the services it supervises.
func guestCmd(spec sandbox.Spec, def sandbox.Display, st State) []string {
	cmd := []string{GuestPath, "guest", "--state-dir", GuestStateDir, "--workspace", WorkspacePath}
	if st.Transport == sandbox.TransportTCP {
		cmd = append(cmd, "--listen", "tcp:"+st.GuestAddr, "--secret-file", GuestStateDir+"/"+secretFile)
	}
	d := spec.Display
	if d == (sandbox.Display{}) {
		d = def
	}
	if d.Width > 0 && d.Height > 0 {
		cmd = append(cmd, "--display-size", fmt.Sprintf("%dx%d", d.Width, d.Height))
	}
	if b := sandbox.BindingOf(spec).WebBase; b != "" {
		cmd = append(cmd, "--web-base", b)
	}
	if spec.Binding != nil {
		cmd = append(cmd, "--bound") // no process in it may rebind it (POST /bind)
	}
	return cmd
}

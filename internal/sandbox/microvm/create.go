package microvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/guest/vminit"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Create boots a VM for spec and returns once its guest answers. On any
// failure it removes whatever it made.
func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	if err := d.checkSpec(spec); err != nil {
		return nil, err
	}
	if err := d.Available(ctx); err != nil {
		return nil, err
	}
	if err := d.cfg.MinFree.Check(d.cfg.StateDir, sandbox.BindingOf(spec).WorkspaceDir); err != nil {
		return nil, err
	}
	k, initrd, err := d.bootAssets(ctx)
	if err != nil {
		return nil, err
	}
	image := d.cfg.Image
	if spec.Image != "" {
		image = spec.Image
	}
	rootfs, err := d.rootfs(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	accel, why := ChooseAccel(ctx, d.cfg.QEMU, k.Image)
	if accel == TCG {
		d.cfg.Log.Debug("microvm under TCG", "why", why)
	}
	gcfg, err := d.guestConfig(ctx, spec, image, accel)
	if err != nil {
		return nil, err
	}
	r, err := d.prepare(spec, accel, gcfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = removeState(r.st)
			releaseUID(r.st.UID)
		}
	}()
	if err := d.boot(ctx, r, k, initrd, rootfs); err != nil {
		return nil, err
	}
	r.watch()
	vms.Store(r.h.ID, r)
	d.cfg.Log.Debug("microvm sandbox ready", "sandbox_id", r.h.ID, "job_id", r.h.JobID, "accel", r.st.Accel)
	return &Sandbox{r: r, client: r.vm.Guest()}, nil
}

// checkSpec refuses what the tier cannot give or would weaken it.
func (d *Driver) checkSpec(spec sandbox.Spec) error {
	c := d.Capabilities()
	if spec.Isolation != "" && spec.Isolation != c.Isolation {
		return fmt.Errorf("%w: this driver runs %s sandboxes, not %s", sandbox.ErrIsolationUnavailable, c.Isolation, spec.Isolation)
	}
	if err := c.CheckNetwork(spec.Network); err != nil {
		return fmt.Errorf("%w (a microVM has no network device)", err)
	}
	l := spec.Limits
	if l.MemoryBytes < 0 || l.NanoCPUs < 0 || l.PidsLimit < 0 || l.DiskBytes < 0 || l.NoFile < 0 {
		return fmt.Errorf("%w: negative limits %+v", sandbox.ErrInvalidSpec, l)
	}
	if l.MemoryBytes != 0 && l.MemoryBytes < 16<<20 || l.PidsLimit != 0 && l.PidsLimit < 32 || l.NoFile != 0 && l.NoFile < 16 {
		return fmt.Errorf("%w: limits too small to start a sandbox: %+v", sandbox.ErrInvalidSpec, l)
	}
	if err := sandbox.CheckBinding(sandbox.BindingOf(spec), false); err != nil {
		return err
	}
	if n := len(filepath.Join(d.cfg.StateDir, "0123456789ab", "serial.sock")); n > 107 {
		return fmt.Errorf("%w: state dir %s gives %d-byte socket paths, over the 107 Linux allows", sandbox.ErrInvalidSpec, d.cfg.StateDir, n)
	}
	return sandbox.CheckDisplay(spec)
}

// guestConfig is what the guest is told: its environment (the image's,
// then the spec's), limits, shared workspace and daemon flags.
func (d *Driver) guestConfig(ctx context.Context, spec sandbox.Spec, image string, accel Accel) (vminit.Config, error) {
	env, err := ImageEnv(ctx, image)
	if err != nil {
		return vminit.Config{}, fmt.Errorf("create sandbox: %w", err)
	}
	b := sandbox.BindingOf(spec)
	keys := make([]string, 0, len(b.Env))
	for k := range b.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+b.Env[k])
	}
	lim := d.limits(spec.Limits)
	disp := spec.Display
	if disp == (sandbox.Display{}) {
		disp = d.cfg.Display
	}
	var args []string
	if disp.Width > 0 && disp.Height > 0 {
		args = append(args, "--display-size", fmt.Sprintf("%dx%d", disp.Width, disp.Height))
	}
	if b.WebBase != "" {
		args = append(args, "--web-base", b.WebBase)
	}
	if spec.Binding != nil {
		args = append(args, "--bound") // no process in it may rebind it (POST /bind)
	}
	if accel == TCG {
		args = append(args, "--service-timeout", tcgServiceTimeout.String())
	}
	return vminit.Config{Env: env, MemoryBytes: lim.MemoryBytes, PidsLimit: lim.PidsLimit, NanoCPUs: lim.NanoCPUs,
		NoFile: lim.NoFile, SharedWorkspace: true, DaemonArgs: args}, nil
}

// tcgServiceTimeout is how long the guest's desktop programs and Jupyter
// may take to start answering in a VM under TCG: its 20 s default is
// made for containers, and under TCG, on 2 loaded cores, the notebook
// server alone takes most of a minute (docs/microvm.md).
const tcgServiceTimeout = 2 * time.Minute

// limits are the spec's limits, the driver's defaults where it sets none.
func (d *Driver) limits(l sandbox.Limits) sandbox.Limits { return l.Or(d.cfg.Defaults) }

// vmOverheadMiB is the VM's memory beyond the sandbox's limit: the kernel
// and the initramfs, which stays in memory (87 MB, mostly the agentbox
// binary; a 256 MiB VM cannot even unpack it).
const vmOverheadMiB = 384

// vmMemoryMiB is the VM's size for a memory limit (0: none, 1 GiB).
func vmMemoryMiB(limit int64) int {
	if limit <= 0 {
		return 1024
	}
	return max(512, int((limit+1<<20-1)>>20)+vmOverheadMiB)
}

// vCPUs is the VM's CPU count for a CPU limit: rounded up, at least one,
// at most the host's.
func vCPUs(nanoCPUs int64) int {
	n := int((nanoCPUs + 1e9 - 1) / 1e9)
	return min(max(n, 1), runtime.NumCPU())
}

// prepare makes the sandbox's state directory, its workspace, config disk
// and handle (written before QEMU starts, so that List finds a VM whose
// Create was cut short).
func (d *Driver) prepare(spec sandbox.Spec, accel Accel, gcfg vminit.Config) (*running, error) {
	lim := d.limits(spec.Limits)
	id := newID()
	st := State{StateDir: filepath.Join(d.cfg.StateDir, id), Accel: accel,
		MemoryMiB: vmMemoryMiB(lim.MemoryBytes), CPUs: vCPUs(lim.NanoCPUs), NoFile: lim.NoFile}
	uid, err := d.allocUID()
	if err != nil {
		return nil, err
	}
	st.UID = uid
	if err := os.MkdirAll(st.StateDir, 0o700); err != nil {
		releaseUID(uid)
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	r := &running{st: st, bound: spec.Binding != nil}
	gcfg.AgentUID = uid // the agent's uid is the VM's, as QEMU's is
	err = d.prepareWorkspace(&r.st, spec, lim.DiskBytes)
	if err == nil {
		err = writeConfigDisk(r.st.StateDir, gcfg)
	}
	if err == nil {
		r.h, err = handleOf(id, sandbox.BindingOf(spec).JobID, spec.Owner, r.st)
	}
	if err == nil {
		err = writeHandle(r.st.StateDir, r.h)
	}
	if err != nil {
		_ = removeState(r.st)
		releaseUID(uid)
		return nil, err
	}
	return r, nil
}

// prepareWorkspace makes the directory virtiofsd shares: for a workspace
// agentbox owns (a scratch one in the state dir, or a job's) a loop disk
// of the quota's size holding the workspace's content (see
// package loopdisk); for a directory a caller brought, the directory
// itself, under a watchdog (watch.go). Either is given to the guest's
// agent uid, the VM's own (st.UID): virtiofsd creates files as the
// guest's uid, checked against the host directory's owner, so the host
// sees them as that uid's, which no host account has.
func (d *Driver) prepareWorkspace(st *State, spec sandbox.Spec, diskBytes int64) error {
	b := sandbox.BindingOf(spec)
	if b.WorkspaceDir == "" {
		st.WorkspaceDir, st.OwnsWorkspace = filepath.Join(st.StateDir, "workspace"), true
		if err := os.Mkdir(st.WorkspaceDir, 0o755); err != nil {
			return fmt.Errorf("sandbox workspace: %w", err)
		}
	} else {
		owner, err := ownerOf(b.WorkspaceDir)
		if err != nil {
			return fmt.Errorf("workspace owner: %w", err)
		}
		st.WorkspaceDir, st.WorkspaceOwner = b.WorkspaceDir, owner
	}
	st.DiskBytes = diskBytes
	if st.OwnsWorkspace || b.ManagedWorkspace {
		return d.disks.Make(loopdisk.Disk{StateDir: st.StateDir, WorkspaceDir: st.WorkspaceDir,
			Bytes: diskBytes, UID: st.UID, GID: st.UID})
	}
	if err := loopdisk.ChownTree(st.WorkspaceDir, st.UID, st.UID); err != nil {
		return fmt.Errorf("sandbox workspace: %w", err)
	}
	return nil
}

// sharedDir is the host directory virtiofsd shares as the VM's
// /workspace: the loop disk's mount point when the sandbox has one (the
// workspace directory gets the content back only at Destroy), else the
// workspace directory itself.
func sharedDir(st State) string {
	if loopdisk.Has(st.StateDir) {
		_, mnt := loopdisk.Paths(st.StateDir)
		return mnt
	}
	return st.WorkspaceDir
}

func writeConfigDisk(dir string, c vminit.Config) error {
	b, err := c.Encode()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.img"), b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("config disk: %w", err)
	}
	return nil
}

// boot starts the VM of r and waits for its guest.
func (d *Driver) boot(ctx context.Context, r *running, k Kernel, initrd, rootfs string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	console := &capped.Buffer{Max: 4 << 10}
	vm, err := Start(ctx, Config{QEMU: d.cfg.QEMU, Kernel: k.Image, Initramfs: initrd, Rootfs: rootfs,
		MemoryMiB: r.st.MemoryMiB, CPUs: r.st.CPUs, Accel: r.st.Accel, Dir: r.st.StateDir,
		ConfigDisk: filepath.Join(r.st.StateDir, "config.img"), WorkspaceDir: sharedDir(r.st), Stderr: console, UID: r.st.UID,
		ConsoleLimit: d.cfg.ConsoleLimit, NoFile: r.st.NoFile})
	if err != nil {
		return fmt.Errorf("boot microvm: %w%s", err, consoleTail(r.st.StateDir))
	}
	r.vm = vm
	return nil
}

// consoleTail is the end of a VM's console log, for an error.
func consoleTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return "; console:\n" + s
	}
	return ""
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

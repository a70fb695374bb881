package docker

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/imagename"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// A job may run in an image of its own, which the operator allows but a
// user wrote: its Dockerfile is hostile. An image can set, for every
// container made from it, a user, an entrypoint and command, a working
// directory, environment variables, volumes, labels, a health check, a
// stop signal and exposed ports. The driver overrides each, so a sandbox's
// posture (uid, capabilities, network, limits, mounts, guest) is the same
// whatever its image:
//
//   - User, Entrypoint, Cmd, WorkingDir: containerConfig sets them (the
//     sandbox's uid; the guest, under the engine's init; /workspace).
//   - Env reaches the guest's commands, as the image means it to, but not
//     the guest itself where it reads it: guestEnv blanks the Go runtime's
//     variables and agentbox's own. LD_PRELOAD and the like cannot reach
//     the guest or the init: both are static binaries (CheckGuestBinary).
//   - Volumes would be anonymous volumes: writable outside the read-only
//     root and beyond the disk quota. volumeTmpfs puts a tmpfs, bounded by
//     the sandbox's memory, in each one's place, and refuses a volume
//     inside a directory mounted from the host, which would hide it.
//   - Labels: the driver sets every label it reads, and List trusts only
//     containers named as Create names them (image labels are on every
//     container of the image, a build's step containers included).
//   - Healthcheck: turned off (it would run the image's command in the
//     sandbox, outside the guest). StopSignal: SIGTERM. Exposed ports are
//     never published.
//   - Setuid and file-capability binaries gain nothing: no-new-privileges
//     and an empty capability set.
//   - An image may make a mount point a link (/workspace to /tmp, say):
//     the engine resolves mount targets inside the container's root, so
//     that breaks only the image's own sandboxes, never reaches the host.
//   - An image's size is the operator's to bound when building it: a
//     sandbox's root is read-only and shared, it never grows or copies.

// imageConfig is what the driver reads of a sandbox's image.
type imageConfig struct {
	ref string
	env []string
	// tmpfs are the image's volumes that get a tmpfs (volumeTmpfs).
	tmpfs []string
}

// inspectImage reads what ref's image sets that the driver overrides. A
// missing image is ErrImageMissing, with how to build it: the engine is
// never asked to pull.
func (d *Driver) inspectImage(ctx context.Context, ref string) (imageConfig, error) {
	info, err := d.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		how := "agentbox image build"
		if !sameImage(ref, d.cfg.Image) {
			how = "agentbox image build --dockerfile PATH --tag " + ref
		}
		return imageConfig{}, fmt.Errorf("create sandbox: image %s is not on the engine (agentbox never pulls one): %w; build it with: %s",
			ref, sandbox.ErrImageMissing, how)
	}
	if err != nil {
		return imageConfig{}, fmt.Errorf("create sandbox: inspect image %s: %w", ref, engineErr(err))
	}
	ic := imageConfig{ref: ref}
	if c := info.Config; c != nil {
		ic.env = c.Env
		vols := make([]string, 0, len(c.Volumes))
		for v := range c.Volumes {
			vols = append(vols, v)
		}
		sort.Strings(vols)
		if ic.tmpfs, err = volumeTmpfs(ref, vols); err != nil {
			return imageConfig{}, err
		}
	}
	return ic, nil
}

// sameImage reports whether a and b name one image ("x" is "x:latest").
func sameImage(a, b string) bool {
	na, errA := imagename.Normalize(a)
	nb, errB := imagename.Normalize(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return na == nb
}

// guestEnv blanks, for the guest, each variable of the image's env that
// the guest reads (guest.ReadsEnv). Empty, each means its default. The
// image's other variables reach the guest's commands unchanged.
func guestEnv(image []string) []string {
	var out []string
	for _, kv := range image {
		if k, _, _ := strings.Cut(kv, "="); guest.ReadsEnv(k) {
			out = append(out, k+"=")
		}
	}
	return out
}

// hostMounts are the paths a sandbox has from the host, which no volume of
// its image may be inside; tmpfsMounts are its tmpfs mounts; no volume
// may be on or inside kernelDirs, the engine's.
var (
	hostMounts  = []string{WorkspacePath, GuestStateDir, GuestPath, "/etc/passwd", "/etc/group"}
	tmpfsMounts = []string{"/tmp", "/home/agent"}
	kernelDirs  = []string{"/proc", "/sys", "/dev"}
)

// CheckVolumes refuses the volumes an image declares that no sandbox of
// it would start with (volumeTmpfs), for a build to say so at once.
func CheckVolumes(ref string, volumes []string) error {
	_, err := volumeTmpfs(ref, volumes)
	return err
}

// volumeTmpfs returns the paths where the image declares a volume that the
// driver does not mount already, each to get a tmpfs instead of an
// anonymous volume. A volume inside a host mount, or not an absolute path
// below /, is refused.
func volumeTmpfs(ref string, volumes []string) ([]string, error) {
	var out []string
	for _, v := range volumes {
		p := path.Clean(v)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("%w: image %s declares VOLUME %q; sandboxes take only absolute paths below /", sandbox.ErrInvalidSpec, ref, v)
		}
		if slices.Contains(hostMounts, p) || slices.Contains(tmpfsMounts, p) {
			continue // the driver's own mount is there: the engine makes no volume
		}
		for _, m := range hostMounts {
			if strings.HasPrefix(p, m+"/") {
				return nil, fmt.Errorf("%w: image %s declares VOLUME %s inside %s, which sandboxes mount from the host; remove it from the image",
					sandbox.ErrInvalidSpec, ref, v, m)
			}
		}
		for _, k := range kernelDirs {
			if p == k || strings.HasPrefix(p, k+"/") {
				return nil, fmt.Errorf("%w: image %s declares VOLUME %s over the kernel's %s; remove it from the image", sandbox.ErrInvalidSpec, ref, v, k)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// neutralize overrides, on cfg and hostCfg, what the image ic would set
// (see the top of this file).
func neutralize(ic imageConfig, cfg *container.Config, hostCfg *container.HostConfig, tmpfsOpts string) {
	cfg.Env = append(guestEnv(ic.env), cfg.Env...)
	cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
	cfg.StopSignal = "SIGTERM"
	for _, v := range ic.tmpfs {
		hostCfg.Tmpfs[v] = tmpfsOpts + ",mode=0755"
	}
}

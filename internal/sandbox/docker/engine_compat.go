package docker

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// This file holds what Podman's Docker-compatible API needs done
// differently from Docker's, each difference applied only when the engine
// says it is Podman (its /version components), never guessed from the
// engine's address.

// isPodman reports whether the driver's engine is Podman, asked once: an
// engine that does not answer is asked again at the next create.
func (d *Driver) isPodman(ctx context.Context) (bool, error) {
	d.engineMu.Lock()
	defer d.engineMu.Unlock()
	if d.engineKnown {
		return d.podman, nil
	}
	e, err := d.Engine(ctx)
	if err != nil {
		return false, fmt.Errorf("ask the engine what it is: %w", err)
	}
	d.engineKnown, d.podman = true, e.Name == "Podman"
	return d.podman, nil
}

// PodmanIgnoresRuntime says why the gvisor tier is unavailable on Podman.
// Podman 4.3's compatible API ignores HostConfig.Runtime (measured: a
// container asking for runsc ran under runc, inspect naming its runtime
// "oci"), so a sandbox of the gvisor tier would silently be one of the
// container tier; the driver refuses it instead.
const PodmanIgnoresRuntime = "the gvisor tier cannot run through Podman's Docker-compatible API: Podman ignores the runtime a container asks for there " +
	"and runs every container under the service's default runtime (runc or crun), so a gvisor sandbox would be a runc one; " +
	"use Docker with runsc registered (scripts/setup.sh) for the gvisor tier"

// fitEngine sets what of hostCfg its engine reads its own way: the
// seccomp profile (seccompFor) and, on Podman, the tmpfs options
// (podmanTmpfs) and the process count.
func (d *Driver) fitEngine(ctx context.Context, hostCfg *container.HostConfig, stateDir string) error {
	podman, err := d.isPodman(ctx)
	if err != nil {
		return err
	}
	if podman && hostCfg.Runtime != "" {
		return fmt.Errorf("%w: %s", sandbox.ErrIsolationUnavailable, PodmanIgnoresRuntime)
	}
	seccomp, err := seccompFor(podman, stateDir)
	if err != nil {
		return err
	}
	hostCfg.SecurityOpt = []string{"no-new-privileges", seccomp}
	if podman {
		for path, opts := range hostCfg.Tmpfs {
			hostCfg.Tmpfs[path] = podmanTmpfs(opts)
		}
		if hostCfg.PidsLimit != nil && *hostCfg.PidsLimit > 0 {
			hostCfg.Ulimits = append(hostCfg.Ulimits, podmanNproc(*hostCfg.PidsLimit))
		}
		if _, ok := hostCfg.Tmpfs["/var/tmp"]; !ok && hostCfg.ReadonlyRootfs {
			hostCfg.Tmpfs["/var/tmp"] = podmanVarTmp
		}
	}
	return nil
}

// podmanVarTmp is the mount over /var/tmp on Podman. Under a read-only
// root Podman mounts a writable tmpfs on /tmp, /var/tmp and /run unless
// the container has its own there (its read-only-tmpfs, which the
// compatible API cannot turn off); /var/tmp is world-writable in the
// image, so it gets an empty read-only one, as it is read-only on Docker.
// /tmp is the sandbox's own; Podman's /run is root's and 0755, so the
// sandbox's uid cannot write there either.
const podmanVarTmp = "ro,nosuid,nodev,noexec,size=4k"

// podmanNproc is the RLIMIT_NPROC of a sandbox of pids processes on
// Podman. Docker leaves it at its daemon's; rootful Podman sets 1048576,
// which fails the start ("error setting rlimit type 6") where the engine
// may not raise the hard limit (a host without CAP_SYS_RESOURCE, like
// CI's). The pids limit is the same bound: the sandbox's uid is its own,
// so every process that uid has on the host is the sandbox's.
func podmanNproc(pids int64) *container.Ulimit {
	return &container.Ulimit{Name: "nproc", Soft: pids, Hard: pids}
}

// podmanTmpfs is Docker's tmpfs options opts as Podman reads them. Podman
// 4 refuses uid= and gid= ("unknown mount option"); its U gives the mount
// to the container's user, which is the sandbox's uid:uid, as they do.
// Docker adds noexec to a tmpfs that does not ask for exec, Podman does
// not: it is added so that /tmp and the home are noexec on both.
func podmanTmpfs(opts string) string {
	var out []string
	chown, exec := false, false
	for _, o := range strings.Split(opts, ",") {
		switch {
		case strings.HasPrefix(o, "uid="), strings.HasPrefix(o, "gid="):
			chown = true
			continue
		case o == "exec", o == "noexec":
			exec = true
		}
		out = append(out, o)
	}
	if chown {
		out = append(out, "U")
	}
	if !exec {
		out = append(out, "noexec")
	}
	return strings.Join(out, ",")
}

package doctor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/wiring"
)

// GVisorBanner is the first line of a gVisor kernel's log: a container
// whose dmesg shows it ran under runsc.
const GVisorBanner = "Starting gVisor..."

const setupFix = "sudo ./scripts/setup.sh --no-run   (installs Debian's runsc and registers it in /etc/docker/daemon.json)"

// tierChecks say which isolation tiers work here: container once the
// engine answers, gvisor only once a container ran under runsc and its
// kernel log was gVisor's, microvm only once a VM booted from the guest
// kernel and answered. The default tier
// (AGENTBOX_ISOLATION) failing fails the doctor; another only warns.
func (d doctor) tierChecks(ctx context.Context) []Check {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	checks := []Check{d.containerTier(ctx), d.gvisorTier(ctx), d.microvmTier(ctx)}
	for i := range checks {
		name := strings.TrimPrefix(checks[i].Name, "tier ")
		if name == d.cfg.Sandbox.Isolation {
			checks[i].Detail += " (the default: AGENTBOX_ISOLATION)"
		} else if checks[i].Status == Fail {
			checks[i].Status = Warn
		}
	}
	return checks
}

func (d doctor) containerTier(ctx context.Context) Check {
	cli, err := wiring.DockerClient(d.cfg.Docker)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		return Check{"tier container", Fail, "no engine: " + err.Error(), "see the engine check"}
	}
	return Check{"tier container", OK, "works: runc, the engine's default runtime", ""}
}

func (d doctor) gvisorTier(ctx context.Context) Check {
	cli, err := wiring.DockerClient(d.cfg.Docker)
	if err != nil {
		return Check{"tier gvisor", Fail, err.Error(), "check DOCKER_HOST"}
	}
	defer cli.Close()
	info, err := cli.Info(ctx)
	if err != nil {
		return Check{"tier gvisor", Fail, "no engine: " + err.Error(), "see the engine check"}
	}
	if _, ok := info.Runtimes[docker.RuntimeGVisor]; !ok {
		return Check{"tier gvisor", Fail, "not working: the engine has no runsc runtime", setupFix}
	}
	begin := time.Now()
	log, err := RunGVisor(ctx, cli, d.cfg.Sandbox.Image, "dmesg")
	if err != nil {
		return Check{"tier gvisor", Fail, "not working: runsc is registered but a test container failed: " + err.Error(), setupFix}
	}
	if !strings.Contains(log, GVisorBanner) {
		return Check{"tier gvisor", Fail, fmt.Sprintf("not working: a test container under runsc did not show gVisor's kernel log (dmesg: %.200q)", log), setupFix}
	}
	return Check{"tier gvisor", OK, fmt.Sprintf("works: a test container ran under runsc in %v, its dmesg gVisor's", time.Since(begin).Round(time.Millisecond)), ""}
}

// microvmTier boots a VM (the kernel and the guest alone, microvm.Probe)
// with the driver the server would use.
func (d doctor) microvmTier(ctx context.Context) Check {
	vm, err := microvm.NewDriver(drivers.MicroVMConfig(drivers.Options{Docker: docker.Config{
		StateDir: filepath.Join(d.cfg.DataDir, "sandboxes"), Image: d.cfg.Sandbox.Image, GuestBinary: d.cfg.Sandbox.GuestBinary}}))
	if err != nil {
		return Check{"tier microvm", Fail, err.Error(), microvm.Install}
	}
	if err := docker.CheckGuestBinary(vm.GuestBinary()); err != nil {
		return Check{"tier microvm", Fail, "no static guest binary for the VM's init: " + err.Error(), "see the guest binary check"}
	}
	p, err := vm.Probe(ctx)
	if err != nil {
		return Check{"tier microvm", Fail, "not working: " + err.Error(), microvm.Install}
	}
	how := "KVM"
	if p.Accel == microvm.TCG {
		how = "TCG, QEMU's emulation (no KVM: " + strings.SplitN(p.WhyTCG, "\n", 2)[0] + ")"
	}
	return Check{"tier microvm", OK, fmt.Sprintf("works: a VM booted the guest kernel %s under %s and answered in %v",
		p.Kernel, how, p.Boot.Round(time.Millisecond)), ""}
}

// RunGVisor runs cmd in a throwaway container of img under runsc, with
// no network, and returns what it printed; the container is removed.
func RunGVisor(ctx context.Context, cli client.APIClient, img string, cmd ...string) (string, error) {
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Entrypoint: cmd, User: "65534:65534"},
		&container.HostConfig{Runtime: docker.RuntimeGVisor, NetworkMode: "none", CapDrop: []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"}}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			return "", fmt.Errorf("exit status %d", w.StatusCode)
		}
	case err := <-errC:
		return "", fmt.Errorf("wait: %w", err)
	}
	rc, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 1<<20)); err != nil {
		return "", fmt.Errorf("logs: %w", err)
	}
	return out.String(), nil
}

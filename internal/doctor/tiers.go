package doctor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/wiring"
)

// GVisorBanner is the first line of a gVisor kernel's log: a container
// whose dmesg shows it ran under runsc.
const GVisorBanner = "Starting gVisor..."

const setupFix = "sudo ./scripts/setup.sh --no-run   (installs Debian's runsc and registers it in /etc/docker/daemon.json)"

// MicroVMTimeout bounds the microvm tier's check: a first sandbox builds
// the image's root file system, most of a minute on 2 cores.
const MicroVMTimeout = 3 * time.Minute

// tierChecks say which isolation tiers work here: container once the
// engine answers, gvisor only once a container ran under runsc and its
// kernel log was gVisor's, microvm only once a sandbox made through the
// server's driver ran a command. The default tier
// (AGENTBOX_ISOLATION) failing fails the doctor; another only warns.
func (d doctor) tierChecks(ctx context.Context) []Check {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	checks := []Check{d.containerTier(cctx), d.gvisorTier(cctx)}
	vctx, cancel := context.WithTimeout(ctx, MicroVMTimeout)
	defer cancel()
	checks = append(checks, d.microvmTier(vctx))
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

// microvmTier makes a sandbox of the tier through the driver a server
// opens (wiring.NewDriver, its microvm tier), runs a command in it and
// destroys it: what a job does, so "works" means a microvm job starts.
// The first one builds the image's root file system (most of a minute,
// then cached).
func (d doctor) microvmTier(ctx context.Context) Check {
	if err := docker.CheckGuestBinary(d.guestBinary()); err != nil {
		return Check{"tier microvm", Fail, "no static guest binary for the VM's init: " + err.Error(), "see the guest binary check"}
	}
	drv, err := wiring.NewDriver(d.cfg, d.log, max(d.cfg.Server.Concurrency, 1))
	if err != nil {
		return Check{"tier microvm", Fail, "not working: " + err.Error(), microvm.Install}
	}
	defer drv.Close()
	p, err := probeTier(ctx, drv, sandbox.IsolationMicroVM)
	if err != nil {
		return Check{"tier microvm", Fail, "not working: " + err.Error(), microvm.Install}
	}
	return Check{"tier microvm", OK, fmt.Sprintf("works: a sandbox started and ran a command in %v (kernel %s, %s)",
		p.Took.Round(time.Millisecond), p.Kernel, accelText(p.Accel)), ""}
}

// accelText says how the VMs run, from microvm.Driver.Accel's answer
// ("kvm", or "tcg: why not KVM").
func accelText(a string) string {
	how, why, _ := strings.Cut(a, ": ")
	switch microvm.Accel(how) {
	case microvm.KVM:
		return "KVM"
	case microvm.TCG:
		return "TCG, QEMU's emulation (no KVM: " + why + ")"
	}
	return a
}

// guestBinary is the binary the sandboxes run: the configured one, else
// this executable.
func (d doctor) guestBinary() string {
	if bin := d.cfg.Sandbox.GuestBinary; bin != "" {
		return bin
	}
	exe, _ := os.Executable()
	return exe
}

// probed is what probeTier found.
type probed struct {
	// Kernel is the sandbox's kernel release (uname -r).
	Kernel string
	// Accel is how a microvm tier's VMs run (KVM, or TCG and why not
	// KVM); empty for other tiers.
	Accel string
	// Took is the sandbox's create and command.
	Took time.Duration
}

// tierPicker is a driver of several tiers (drivers.Tiers).
type tierPicker interface {
	Tier(ctx context.Context, iso string) (sandbox.Driver, error)
}

// probeTier creates a sandbox of tier iso on drv, as the scheduler does
// for a job, runs uname -r in it and destroys it.
func probeTier(ctx context.Context, drv sandbox.Driver, iso string) (probed, error) {
	begin := time.Now()
	sb, err := drv.Create(ctx, sandbox.Spec{Isolation: iso})
	if err != nil {
		return probed{}, err
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	res, err := sb.Guest().Exec(ctx, guest.ExecRequest{Cmd: []string{"uname", "-r"}, TimeoutMS: 30_000})
	if err != nil {
		return probed{}, fmt.Errorf("run a command in the sandbox: %w", err)
	}
	if res.ExitCode != 0 {
		return probed{}, fmt.Errorf("uname -r in the sandbox exited %d: %.200s", res.ExitCode, res.Stderr)
	}
	p := probed{Kernel: strings.TrimSpace(string(res.Stdout)), Took: time.Since(begin)}
	if t, ok := drv.(tierPicker); ok {
		if vm, err := t.Tier(ctx, iso); err == nil {
			if a, ok := vm.(interface {
				Accel(context.Context) (string, error)
			}); ok {
				p.Accel, _ = a.Accel(ctx)
			}
		}
	}
	return p, nil
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

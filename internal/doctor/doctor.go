// Package doctor checks what agentbox needs on this host — the container
// engine, the sandbox image (and those AGENTBOX_IMAGES allows), the guest
// binary, the data dir, what bounds the sandboxes together (the file
// table, the disk, uids, user namespaces), KVM and the model — and says,
// for each problem, the command that fixes it. The checks are data; cmd/agentbox prints them.
package doctor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/wiring"
)

// Check is one line of the doctor's report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // OK, Warn or Fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// A Check's Status: a failed check fails the doctor, a warning does not.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
)

// Run runs every check against cfg, in the report's order. log receives
// the warnings of the driver the disk check opens.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger) []Check {
	d := doctor{cfg: cfg, log: log}
	checks := d.engineChecks(ctx)
	checks = append(checks, d.guestCheck(), d.dataDirCheck())
	checks = append(checks, d.limitChecks(ctx)...)
	checks = append(checks, gitCheck(), kvmCheck(ctx))
	checks = append(checks, d.tierChecks(ctx)...)
	return append(checks, d.modelCheck(ctx))
}

// gitCheck: the host's git clones repository jobs and records every job's
// starting workspace for its diff.
func gitCheck() Check {
	p, err := exec.LookPath("git")
	if err != nil {
		return Check{"git", Warn, "no git on PATH: jobs get no diff, and repository jobs end in error", "sudo apt-get install git"}
	}
	return Check{"git", OK, p, ""}
}

// Failed reports whether any of checks failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// doctor runs the checks of one configuration.
type doctor struct {
	cfg config.Config
	log *slog.Logger
}

func (d doctor) guestCheck() Check {
	bin := d.cfg.Sandbox.GuestBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return Check{"guest binary", Fail, err.Error(), "export AGENTBOX_GUEST_BINARY=/path/to/static/agentbox"}
		}
		bin = exe
	}
	if err := docker.CheckGuestBinary(bin); err != nil {
		return Check{"guest binary", Fail, err.Error(), "CGO_ENABLED=0 go build -o bin/agentbox ./cmd/agentbox"}
	}
	return Check{"guest binary", OK, bin + " is static", ""}
}

func (d doctor) engineChecks(ctx context.Context) []Check {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cli, err := wiring.DockerClient(d.cfg.Docker)
	if err != nil {
		return []Check{{"engine", Fail, err.Error(), "check DOCKER_HOST"}}
	}
	defer cli.Close()
	e, err := docker.EngineInfo(ctx, cli)
	if err != nil {
		fix := "sudo ./scripts/setup.sh   (installs docker.io and starts dockerd), or: sudo systemctl start docker"
		if strings.Contains(err.Error(), "permission denied") {
			fix = "sudo usermod -aG docker $USER   (then log in again)"
		}
		return []Check{{"engine", Fail, err.Error(), fix},
			{"image", Fail, "cannot check without an engine", "agentbox image build"}}
	}
	engine := Check{"engine", OK, fmt.Sprintf("%s %s (API %s) at %s", e.Name, e.Version, e.APIVersion, cli.DaemonHost()), ""}
	ls, err := image.InspectLayers(ctx, cli, d.cfg.Sandbox.Image)
	return append([]Check{engine, d.imageCheck(ls, err)}, d.imagesCheck(ctx, cli)...)
}

// imageCheck says whether the sandbox image is present and current, and
// which of its layers is ready while the desktop layer is missing.
func (d doctor) imageCheck(ls image.Layers, err error) Check {
	ref, st := d.cfg.Sandbox.Image, ls.Full
	switch {
	case err != nil:
		return Check{"image", Fail, err.Error(), "agentbox image build"}
	case !st.Present && ls.Core.Current:
		return Check{"image", Warn, "the core " + ls.CoreRef + " is ready, the desktop layer (" + ref + ") is not: sandboxes run on the core, " +
			"jobs with the computer and python tools wait while a server builds it", "agentbox image build   (or start agentbox serve, which builds it)"}
	case !st.Present:
		return Check{"image", Fail, ref + " is missing", "agentbox image build"}
	case !st.Current:
		return Check{"image", Fail, ref + " was built from another definition (hash " + short(st.Hash) + ")", "agentbox image build"}
	}
	return Check{"image", OK, ref + " is current (hash " + short(st.Hash) + ")", ""}
}

func short(h string) string { return h[:min(12, len(h))] }

func (d doctor) dataDirCheck() Check {
	dir := d.cfg.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Check{"data dir", Fail, err.Error(), "export AGENTBOX_DATA_DIR=/a/writable/dir"}
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return Check{"data dir", Fail, err.Error(), "sudo chown -R $USER " + dir}
	}
	f.Close()
	os.Remove(f.Name())
	return Check{"data dir", OK, dir + " is writable", ""}
}

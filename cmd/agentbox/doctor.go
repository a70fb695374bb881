package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/wiring"
)

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func newDoctorCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the engine, the sandbox image, KVM and the model configuration, and say how to fix each problem",
		Long: `doctor checks what agentbox needs and prints, for each problem, the exact
command that fixes it: the container engine (Docker or Podman, reachable, its
version), the sandbox image (present, built from this version's definition),
the guest binary (static), the data directory, /dev/kvm (for microVM
sandboxes later), and the model configuration. It exits 1 if anything
required fails; warnings do not fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := a.doctor(cmd.Context())
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				_ = enc.Encode(checks)
			} else {
				printChecks(cmd.OutOrStdout(), checks)
			}
			for _, c := range checks {
				if c.Status == "fail" {
					return exitError{1}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

func (a *app) doctor(ctx context.Context) []check {
	checks := a.engineChecks(ctx)
	checks = append(checks, a.guestCheck(), a.dataDirCheck())
	checks = append(checks, a.limitChecks(ctx)...)
	return append(checks, kvmCheck(), a.modelCheck())
}

func (a *app) guestCheck() check {
	bin := a.cfg.Sandbox.GuestBinary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return check{"guest binary", "fail", err.Error(), "export AGENTBOX_GUEST_BINARY=/path/to/static/agentbox"}
		}
		bin = exe
	}
	if err := docker.CheckGuestBinary(bin); err != nil {
		return check{"guest binary", "fail", err.Error(), "CGO_ENABLED=0 go build -o bin/agentbox ./cmd/agentbox"}
	}
	return check{"guest binary", "ok", bin + " is static", ""}
}

func (a *app) engineChecks(ctx context.Context) []check {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cli, err := wiring.DockerClient(a.cfg.Docker)
	if err != nil {
		return []check{{"engine", "fail", err.Error(), "check DOCKER_HOST"}}
	}
	defer cli.Close()
	e, err := docker.EngineInfo(ctx, cli)
	if err != nil {
		fix := "sudo ./scripts/setup.sh   (installs docker.io and starts dockerd), or: sudo systemctl start docker"
		if strings.Contains(err.Error(), "permission denied") {
			fix = "sudo usermod -aG docker $USER   (then log in again)"
		}
		return []check{{"engine", "fail", err.Error(), fix},
			{"image", "fail", "cannot check without an engine", "agentbox image build"}}
	}
	out := []check{{"engine", "ok", fmt.Sprintf("%s %s (API %s) at %s", e.Name, e.Version, e.APIVersion, cli.DaemonHost()), ""}}
	st, err := image.Inspect(ctx, cli, a.cfg.Sandbox.Image)
	switch {
	case err != nil:
		out = append(out, check{"image", "fail", err.Error(), "agentbox image build"})
	case !st.Present:
		out = append(out, check{"image", "fail", a.cfg.Sandbox.Image + " is missing", "agentbox image build"})
	case !st.Current:
		out = append(out, check{"image", "fail", a.cfg.Sandbox.Image + " was built from another definition (hash " + short(st.Hash) + ")", "agentbox image build"})
	default:
		out = append(out, check{"image", "ok", a.cfg.Sandbox.Image + " is current (hash " + short(st.Hash) + ")", ""})
	}
	return out
}

func short(h string) string { return h[:min(12, len(h))] }

func (a *app) dataDirCheck() check {
	dir := a.cfg.DataDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return check{"data dir", "fail", err.Error(), "export AGENTBOX_DATA_DIR=/a/writable/dir"}
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return check{"data dir", "fail", err.Error(), "sudo chown -R $USER " + dir}
	}
	f.Close()
	os.Remove(f.Name())
	return check{"data dir", "ok", dir + " is writable", ""}
}

func kvmCheck() check {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		fix := "enable virtualization (nested virtualization on a VM) and load kvm: sudo modprobe kvm_intel || sudo modprobe kvm_amd"
		if os.IsPermission(err) {
			fix = "sudo usermod -aG kvm $USER   (then log in again)"
		}
		return check{"kvm", "warn", "/dev/kvm not usable (" + err.Error() + "): microVM sandboxes unavailable; containers work", fix}
	}
	f.Close()
	return check{"kvm", "ok", "/dev/kvm is usable", ""}
}

func (a *app) modelCheck() check {
	m := a.cfg.Model
	switch {
	case m.Name != "":
		return check{"model", "ok", "AGENTBOX_MODEL=" + m.Name, ""}
	case m.AnthropicKey != "":
		return check{"model", "ok", "ANTHROPIC_API_KEY is set", ""}
	case m.OpenAIKey != "" || m.OpenAIBaseURL != "":
		return check{"model", "ok", "OpenAI-compatible endpoint configured", ""}
	}
	return check{"model", "warn", "no model configured: sandboxes work, agent jobs will not",
		"export ANTHROPIC_API_KEY=...   (or OPENAI_API_KEY=..., or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama)"}
}

func printChecks(w io.Writer, checks []check) {
	mark := map[string]string{"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
	for _, c := range checks {
		fmt.Fprintf(w, "%s  %-13s %s\n", mark[c.Status], c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      %-13s fix: %s\n", "", c.Fix)
		}
	}
}

package main

import (
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/doctor"
)

func newDoctorCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the engine, the sandbox image, KVM, the isolation tiers and the model, and say how to fix each problem",
		Long: `doctor checks what agentbox needs and prints, for each problem, the exact
command that fixes it: the container engine (Docker or Podman, reachable, its
version), the sandbox image (present, built from this version's definition),
the guest binary (static), the data directory, /dev/kvm (for microVM
sandboxes later: usable only once a test guest has run on it), each
isolation tier (container; gvisor, working only once a test container
ran under runsc and showed gVisor's kernel log; microvm, working only
once a VM booted Debian's cloud kernel and its guest answered), and
the model: one request for one output token, no retry, within 10s, which
says "not configured", "works (model X, N ms)" or "fails (model X): why".
It exits 1 if anything required fails; warnings do not fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctor.Run(cmd.Context(), a.cfg, a.log)
			doctor.Write(cmd.OutOrStdout(), checks, asJSON)
			if doctor.Failed(checks) {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	a.dataDirFlag(cmd, "the data directory to check")
	return cmd
}

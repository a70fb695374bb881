package main

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
	"github.com/agentbox/agentbox/internal/guest/vminit"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/seccomp"
)

func newGuestCmd() *cobra.Command {
	var stateDir, workspace, displaySize, webBase, listen, secretFile string
	var vmInit, applySeccomp, bound bool
	var serviceTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "guest",
		Short: "Run the in-sandbox daemon (started by agentbox inside each sandbox, not by people)",
		Long: `guest is the daemon agentbox starts as the main process of every sandbox.
It listens on a unix socket in --state-dir (a host directory bind-mounted at
/run/agentbox), or where --listen says: a vsock port in a virtual machine,
or TCP (then every request must carry the sandbox's secret, from
--secret-file or AGENTBOX_GUEST_SECRET). It executes commands and file
operations for the host, confined to --workspace. It is not meant to be run
by hand.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		// The guest must not read the host's configuration.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			if vmInit {
				return vminit.Run(log)
			}
			if applySeccomp {
				if err := seccomp.Apply(); err != nil {
					return err
				}
			}
			d, err := sandbox.ParseDisplay(displaySize)
			if err != nil {
				return err
			}
			where, secret, err := daemon.ListenerFor(listen, stateDir, secretFile)
			if err != nil {
				return err
			}
			return daemon.ListenAndServe(cmd.Context(), daemon.Config{Workspace: workspace, Version: version, Log: log,
				DisplayWidth: d.Width, DisplayHeight: d.Height, WebBase: webBase, Bound: bound, ServiceTimeout: serviceTimeout, Secret: secret}, where)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "/run/agentbox", "directory for the guest's unix socket")
	cmd.Flags().StringVar(&workspace, "workspace", "/workspace", "directory every file path is confined to")
	cmd.Flags().StringVar(&displaySize, "display-size", "1024x768", "the desktop's screen size, WIDTHxHEIGHT")
	cmd.Flags().StringVar(&listen, "listen", "", "where to listen: unix:PATH, tcp:HOST:PORT, vsock:PORT or serial:DEVICE (default unix:<state dir>/"+guest.SocketName+")")
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "file holding the secret every request must carry (default AGENTBOX_GUEST_SECRET; required with tcp:)")
	cmd.Flags().StringVar(&webBase, "web-base", "", "URL path under which the host serves this sandbox's Jupyter and noVNC pages")
	cmd.Flags().BoolVar(&bound, "bound", false, "the sandbox is bound to its job already: refuse POST /bind")
	cmd.Flags().Var(durationVar(&serviceTimeout, 0), "service-timeout", "how long the desktop's programs and Jupyter may take to start answering (default 20s)")
	cmd.Flags().BoolVar(&vmInit, "vm-init", false, "run as process 1 of a microVM: prepare it, run the guest on its serial port, power off")
	_ = cmd.Flags().MarkHidden("vm-init")
	cmd.Flags().BoolVar(&applySeccomp, strings.TrimPrefix(vminit.DaemonSeccompFlag, "--"), false,
		"put the daemon and every command under the sandboxes' seccomp profile (a microVM's guest, where no engine does)")
	_ = cmd.Flags().MarkHidden(strings.TrimPrefix(vminit.DaemonSeccompFlag, "--"))
	return cmd
}

// parseDisplaySize reads WIDTHxHEIGHT, within the limits sandbox.CheckDisplay sets.

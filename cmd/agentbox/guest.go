package main

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/guest"
)

func newGuestCmd() *cobra.Command {
	var stateDir, workspace string
	cmd := &cobra.Command{
		Use:   "guest",
		Short: "Run the in-sandbox daemon (started by agentbox inside each sandbox, not by people)",
		Long: `guest is the daemon agentbox starts as the main process of every sandbox.
It listens on a unix socket in --state-dir (a host directory bind-mounted at
/run/agentbox) and executes commands and file operations for the host,
confined to --workspace. It is not meant to be run by hand.`,
		Args: cobra.NoArgs,
		// The guest must not read the host's configuration.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			srv, err := guest.NewServer(guest.ServerConfig{Workspace: workspace, Version: version, Log: log})
			if err != nil {
				return err
			}
			l, err := guest.Listen(filepath.Join(stateDir, guest.SocketName))
			if err != nil {
				return err
			}
			log.Info("guest listening", "socket", l.Addr().String(), "workspace", workspace, "uid", os.Getuid())
			return srv.Serve(cmd.Context(), l)
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "/run/agentbox", "directory for the guest's unix socket")
	cmd.Flags().StringVar(&workspace, "workspace", "/workspace", "directory every file path is confined to")
	return cmd
}

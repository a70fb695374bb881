package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/ui"
)

// newHighlightCmd is the web UI's file highlighter, a child process the
// server starts for each file its viewer shows and kills when the file's
// time is up (see internal/ui's lexing.go). It is not for people.
func newHighlightCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "highlight",
		Short: "Highlight one file for the web UI's viewer (started by agentbox serve, not by people)",
		Long: `highlight reads one file of a sandbox's workspace, as JSON on its standard
input, and writes its lines as highlighted tokens on its standard output.
agentbox serve runs it for each file its web UI shows, with an empty
environment, and kills it when the file's time is up: the lexers are
backtracking regular expressions over what a sandbox wrote. It is not meant
to be run by hand.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		// The highlighter must not read the host's configuration: it runs
		// with an empty environment.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(*cobra.Command, []string) error {
			return ui.ServeHighlight(os.Stdin, os.Stdout)
		},
	}
}

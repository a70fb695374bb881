package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// commit is set at build time with -ldflags "-X main.commit=..."; else it
// comes from the build's VCS stamp, when the binary was built in a git
// checkout.
var commit = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print agentbox's version, the commit it was built from and its Go version",
		Long: `version prints the version of this agentbox binary, the git commit it was
built from ("+dirty" when the checkout had changes) and the Go toolchain
and platform, one per line. --version prints the same.`,
		Args: cobra.NoArgs,
		// Nothing to configure: a broken environment must not hide the version.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout())
		},
	}
}

// printVersion writes what `agentbox version` prints.
func printVersion(w io.Writer) error {
	_, err := fmt.Fprintf(w, "agentbox %s\ncommit   %s\ngo       %s %s/%s\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// buildCommit is the commit the binary was built from, "unknown" when the
// build did not record one (go run, a build outside a checkout).
func buildCommit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

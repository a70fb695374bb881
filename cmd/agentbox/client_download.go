package main

import (
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/wiring"
)

// downloadFlags are the options of `agentbox download`.
type downloadFlags struct {
	clientFlags
	wiring.DownloadFlags
}

func newDownloadCmd(a *app) *cobra.Command {
	var f downloadFlags
	cmd := &cobra.Command{
		Use:   "download [flags] JOB_ID",
		Short: "Download an ended job's workspace as a zip (or one file of it)",
		Long: `download saves the workspace of an ended job (complete, error or canceled)
as a zip: ./JOB_ID.zip unless -o names another file (- for stdout). It
refuses to overwrite an existing file unless --force. --file PATH downloads
one file of the workspace instead (saved under its base name by default).
Progress goes to stderr.

-o - on a terminal shows the sandbox's control characters and escape
sequences but colours (as ^[, ^G, <U+009B>) instead of acting on them;
a pipe gets the bytes unchanged, and so does a terminal with --raw.` + clientEnvHelp,
		Example: `  agentbox download job_0193b2c4d5e6f7a8b9c
  agentbox download -o result.zip --force job_0193b2c4d5e6f7a8b9c
  agentbox download --file src/app.py -o - job_0193b2c4d5e6f7a8b9c | less`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.download(cmd, f, args[0]) },
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.Output, "output", "o", "", "file to write (default ./JOB_ID.zip; - for stdout)")
	fl.StringVar(&f.File, "file", "", "download only this workspace-relative file")
	fl.BoolVar(&f.Force, "force", false, "overwrite the output file if it exists")
	fl.BoolVar(&f.Raw, "raw", false, "with -o -: "+rawUsage)
	return cmd
}

func (a *app) download(cmd *cobra.Command, f downloadFlags, id string) error {
	c, err := a.newClient(f.clientFlags)
	if err != nil {
		return err
	}
	return f.Download(cmd.Context(), c, id, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

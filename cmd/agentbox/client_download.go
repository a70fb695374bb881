package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
)

// downloadFlags are the options of `agentbox download`.
type downloadFlags struct {
	clientFlags
	output, file string
	force, raw   bool
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
	fl.StringVarP(&f.output, "output", "o", "", "file to write (default ./JOB_ID.zip; - for stdout)")
	fl.StringVar(&f.file, "file", "", "download only this workspace-relative file")
	fl.BoolVar(&f.force, "force", false, "overwrite the output file if it exists")
	fl.BoolVar(&f.raw, "raw", false, "with -o -: "+rawUsage)
	return cmd
}

func (a *app) download(cmd *cobra.Command, f downloadFlags, id string) error {
	c, err := a.newClient(f.clientFlags)
	if err != nil {
		return err
	}
	out := cmp.Or(f.output, id+".zip")
	if f.file != "" {
		out = cmp.Or(f.output, path.Base(f.file))
	}
	get := func(w io.Writer) (int64, error) { return c.Download(cmd.Context(), id, f.file, w) }
	if out == "-" {
		w := render.ForTerminal(cmd.OutOrStdout(), f.raw)
		_, err := get(w)
		return cmp.Or(err, w.Close())
	}
	if _, err := os.Lstat(out); err == nil && !f.force {
		return fmt.Errorf("%s exists; use --force to overwrite it or -o to choose another file", out)
	}
	prog := render.NewProgress(cmd.ErrOrStderr(), "downloading "+id)
	n, err := client.WriteFile(out, f.force, func(w io.Writer) (int64, error) { return get(io.MultiWriter(w, prog)) })
	prog.Done()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%d bytes) to %s\n", units.BytesSize(float64(n)), n, out)
	return nil
}

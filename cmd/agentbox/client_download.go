package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
)

// downloadFlags are the options of `agentbox download`.
type downloadFlags struct {
	clientFlags
	output, file string
	force        bool
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
Progress goes to stderr.` + clientEnvHelp,
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
	return cmd
}

func (a *app) download(cmd *cobra.Command, f downloadFlags, id string) error {
	c, err := a.newClient(f.clientFlags)
	if err != nil {
		return err
	}
	get := func(w io.Writer) (int64, error) { return c.DownloadArtifacts(cmd.Context(), id, w) }
	out := firstNonEmpty(f.output, id+".zip")
	if f.file != "" {
		get = func(w io.Writer) (int64, error) { return c.GetFile(cmd.Context(), id, f.file, w) }
		out = firstNonEmpty(f.output, path.Base(f.file))
	}
	if out == "-" {
		_, err := get(cmd.OutOrStdout())
		return err
	}
	if _, err := os.Lstat(out); err == nil && !f.force {
		return fmt.Errorf("%s exists; use --force to overwrite it or -o to choose another file", out)
	}
	prog := newProgress(cmd.ErrOrStderr(), "downloading "+id)
	n, err := saveAs(out, f.force, func(w io.Writer) (int64, error) { return get(io.MultiWriter(w, prog)) })
	prog.done()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%d bytes) to %s\n", units.BytesSize(float64(n)), n, out)
	return nil
}

// saveAs writes a file through a temporary one next to it, so a failed
// download leaves nothing behind; without force an existing file is kept.
func saveAs(name string, force bool, write func(io.Writer) (int64, error)) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".agentbox-download-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	n, err := write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return n, err
	}
	if force {
		return n, os.Rename(tmp.Name(), name)
	}
	if err := os.Link(tmp.Name(), name); errors.Is(err, os.ErrExist) {
		return n, fmt.Errorf("%s appeared meanwhile; not overwriting it", name)
	} else if err != nil {
		return n, os.Rename(tmp.Name(), name) // a file system without hard links
	}
	return n, nil
}

// progress reports bytes downloaded on stderr: redrawn on a terminal, a
// line every few seconds otherwise.
type progress struct {
	w     io.Writer
	label string
	tty   bool
	n     int64
	last  time.Time
}

func newProgress(w io.Writer, label string) *progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, label: label, tty: tty, last: time.Now()}
}

func (p *progress) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	every := 5 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if time.Since(p.last) >= every {
		p.last = time.Now()
		if p.tty {
			fmt.Fprintf(p.w, "\r%s: %s  ", p.label, units.BytesSize(float64(p.n)))
		} else {
			fmt.Fprintf(p.w, "%s: %s\n", p.label, units.BytesSize(float64(p.n)))
		}
	}
	return len(b), nil
}

// done clears a terminal progress line.
func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

package wiring

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/docker/go-units"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/tarpack"
	"github.com/agentbox/agentbox/internal/wire"
)

// Send submits req through c; with --workspace, DIR packed as its
// workspace as it is sent, its progress and size said on errw.
func (f SubmitFlags) Send(ctx context.Context, c *client.Client, req wire.SubmitRequest, errw io.Writer) (wire.SubmitResponse, error) {
	if f.Workspace == "" {
		return c.Submit(ctx, req, f.Key)
	}
	root, err := os.OpenRoot(f.Workspace)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace: %w", err)
	}
	defer root.Close()
	opts := tarpack.PackOptions{Exclude: f.Exclude}
	tree, err := tarpack.Survey(ctx, root, opts)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace %s: %w", f.Workspace, err)
	}
	prog := render.NewProgress(errw, "uploading "+f.Workspace)
	prog.SetTotal(tree.Bytes)
	opts.Progress = prog
	begin := time.Now()
	sr, err := c.SubmitDir(ctx, req, f.Key, root, opts)
	prog.Done()
	if err != nil {
		return sr, err
	}
	fmt.Fprintf(errw, "uploaded %s: %d files, %s, in %s\n", f.Workspace, tree.Files,
		units.BytesSize(float64(tree.Bytes)), time.Since(begin).Round(10*time.Millisecond))
	return sr, nil
}

// DownloadFlags are `agentbox download`'s options.
type DownloadFlags struct {
	// Output is the file to write ("-" for out), File the one workspace
	// file to download ("" for the whole workspace as a zip).
	Output, File string
	// Force overwrites Output; Raw passes a sandbox's bytes to a
	// terminal unchanged.
	Force, Raw bool
}

// Download saves job id's workspace (or f.File) through c as f says:
// into a file, with its progress and size said on errw, or onto out.
func (f DownloadFlags) Download(ctx context.Context, c *client.Client, id string, out, errw io.Writer) error {
	name := cmp.Or(f.Output, id+".zip")
	if f.File != "" {
		name = cmp.Or(f.Output, path.Base(f.File))
	}
	get := func(w io.Writer) (int64, error) { return c.Download(ctx, id, f.File, w) }
	if name == "-" {
		w := render.ForTerminal(out, f.Raw)
		_, err := get(w)
		return cmp.Or(err, w.Close())
	}
	if _, err := os.Lstat(name); err == nil && !f.Force {
		return fmt.Errorf("%s exists; use --force to overwrite it or -o to choose another file", name)
	}
	prog := render.NewProgress(errw, "downloading "+id)
	n, err := client.WriteFile(name, f.Force, func(w io.Writer) (int64, error) { return get(io.MultiWriter(w, prog)) })
	prog.Done()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	fmt.Fprintf(errw, "wrote %s (%d bytes) to %s\n", units.BytesSize(float64(n)), n, name)
	return nil
}

// Diff writes what job id changed, through c, onto out, which it closes:
// as a unified diff (format "diff"), all included, or as a patch.
func Diff(ctx context.Context, c *client.Client, id, format string, all bool, out io.WriteCloser) error {
	if all && format == "patch" {
		return fmt.Errorf("--all is for the diff (--format diff): a patch is the commit of the job's change, without ignored files")
	}
	if format == "diff" {
		format = ""
	}
	var err error
	if all {
		_, err = c.DiffAll(ctx, id, out)
	} else {
		_, err = c.Diff(ctx, id, format, out)
	}
	if err := cmp.Or(err, out.Close()); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/tarpack"
	"github.com/agentbox/agentbox/internal/wire"
)

// checkStart refuses flags naming two starting points.
func (f submitFlags) checkStart() error {
	switch {
	case f.workspace != "" && f.workspaceFrom != "":
		return errors.New("--workspace and --workspace-from: a job starts from one of them")
	case f.workspace == "" && len(f.exclude) > 0:
		return errors.New("--exclude goes with --workspace")
	}
	return nil
}

// send submits req; with --workspace, DIR packed as its workspace.
func (f submitFlags) send(cmd *cobra.Command, c *client.Client, req wire.SubmitRequest) (wire.SubmitResponse, error) {
	if f.workspace == "" {
		return c.Submit(cmd.Context(), req, f.key)
	}
	root, err := os.OpenRoot(f.workspace)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace: %w", err)
	}
	defer root.Close()
	opts := tarpack.PackOptions{Exclude: f.exclude}
	tree, err := tarpack.Survey(cmd.Context(), root, opts)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace %s: %w", f.workspace, err)
	}
	prog := render.NewProgress(cmd.ErrOrStderr(), "uploading "+f.workspace)
	prog.SetTotal(tree.Bytes)
	opts.Progress = prog
	begin := time.Now()
	sr, err := c.SubmitDir(cmd.Context(), req, f.key, root, opts)
	prog.Done()
	if err != nil {
		return sr, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "uploaded %s: %d files, %s, in %s\n", f.workspace, tree.Files,
		units.BytesSize(float64(tree.Bytes)), time.Since(begin).Round(10*time.Millisecond))
	return sr, nil
}

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// send submits req; with --workspace, DIR packed as its workspace.
func (f submitFlags) send(cmd *cobra.Command, c *client.Client, req wire.SubmitRequest) (wire.SubmitResponse, error) {
	if f.Workspace == "" {
		return c.Submit(cmd.Context(), req, f.Key)
	}
	root, err := os.OpenRoot(f.Workspace)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace: %w", err)
	}
	defer root.Close()
	opts := workspace.PackOptions{Exclude: f.Exclude}
	tree, err := workspace.Survey(cmd.Context(), root, opts)
	if err != nil {
		return wire.SubmitResponse{}, fmt.Errorf("--workspace %s: %w", f.Workspace, err)
	}
	prog := render.NewProgress(cmd.ErrOrStderr(), "uploading "+f.Workspace)
	prog.SetTotal(tree.Bytes)
	opts.Progress = prog
	begin := time.Now()
	sr, err := c.SubmitDir(cmd.Context(), req, f.Key, root, opts)
	prog.Done()
	if err != nil {
		return sr, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "uploaded %s: %d files, %s, in %s\n", f.Workspace, tree.Files,
		units.BytesSize(float64(tree.Bytes)), time.Since(begin).Round(10*time.Millisecond))
	return sr, nil
}

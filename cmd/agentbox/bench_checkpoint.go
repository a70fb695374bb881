package main

import (
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/wiring"
)

func newBenchCheckpointCmd(a *app) *cobra.Command {
	var o wiring.CheckpointBenchOptions
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Measure a workspace checkpoint after a 1-file change against docker exec tar of the whole tree",
		Long: `checkpoint writes a workspace of --files small Go source files in 20
directories, checkpoints it whole into a blob store (--blobs: a directory
store, by default in a temporary directory, or PostgreSQL), then --rounds
times changes one file and checkpoints it again (incremental: unchanged files
are known by their stat and not read; only the changed file's blob is put,
and the trees of the directories on its path), and prints p50/p95 of those
and the bytes uploaded. In the same run it times the plain engine's full copy of the
same tree: docker exec CONTAINER tar -c -C /workspace . in a container of the
sandbox image with the tree mounted, and prints the ratio. Results are
recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wiring.RunBenchCheckpoint(cmd.Context(), a.cfg, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&o.Files, "files", 5000, "files of the workspace")
	cmd.Flags().IntVar(&o.Rounds, "rounds", 50, "1-file changes, each checkpointed (and docker exec tars timed)")
	cmd.Flags().StringVar(&o.Blobs, "blobs", "", "the blob store: a directory (absolute; a shared mount to measure one), a postgres://… database, or \"postgres\" to start a local server; empty: a temporary directory")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baseline")
	return cmd
}

package wiring

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// openBlobs opens the blob store cfg names (config.BlobsKind), nil for
// none. A "postgres" one shares the job store's database, st.
func openBlobs(cfg config.Config, st store.Store, log *slog.Logger) (blobs.Store, error) {
	kind, dir := cfg.BlobsKind()
	switch kind {
	case config.BlobsDir:
		b, err := dirblobs.New(dir)
		if err != nil {
			return nil, fmt.Errorf("AGENTBOX_BLOBS: %w", err)
		}
		log.Info("checkpoints: a shared directory", "dir", dir)
		return b, nil
	case config.BlobsPostgres:
		return postgresBlobs(st, log)
	}
	return nil, nil
}

// postgresBlobs is the blob store in the job store's PostgreSQL database.
func postgresBlobs(st store.Store, log *slog.Logger) (blobs.Store, error) {
	// Filled in when internal/blobs/pgblobs lands (issue 14, item 4).
	_, _ = st, log
	return nil, fmt.Errorf("AGENTBOX_BLOBS postgres: not available in this build")
}

// openShared is the workspace store over the blob store cfg names, with
// its cache of materialized checkpoints in dir; nil for none.
func openShared(cfg config.Config, st store.Store, log *slog.Logger, dir string) (*workspace.Shared, error) {
	b, err := openBlobs(cfg, st, log)
	if err != nil || b == nil {
		return nil, err
	}
	return workspace.NewShared(b, filepath.Join(dir, "checkpoint-cache")), nil
}

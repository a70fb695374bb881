package wiring

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/blobs/pgblobs"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/postgres"
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

// postgresBlobs is the blob store in the job store's PostgreSQL database
// (its blob_* tables, made by the store's migrations).
func postgresBlobs(st store.Store, log *slog.Logger) (blobs.Store, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil, fmt.Errorf("AGENTBOX_BLOBS postgres: the job store is not PostgreSQL")
	}
	log.Info("checkpoints: the job store's PostgreSQL database")
	return pgblobs.New(pg.Pool()), nil
}

// openShared is the workspace store over the blob store cfg names, with
// its cache of materialized checkpoints in dir, and that blob store; nil
// for none.
func openShared(cfg config.Config, st store.Store, log *slog.Logger, dir string) (*workspace.Shared, blobs.Store, error) {
	b, err := openBlobs(cfg, st, log)
	if err != nil || b == nil {
		return nil, nil, err
	}
	return workspace.NewShared(b, filepath.Join(dir, "checkpoint-cache")), b, nil
}

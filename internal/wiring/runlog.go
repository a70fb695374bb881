package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
)

// openRunLog opens a run's log file at path: every record, debug ones
// included, for whoever looks into why a run went as it did. closeLog
// closes it and returns its path and how many records were warnings or
// worse.
func openRunLog(path string) (log *slog.Logger, closeLog func() (string, int64), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("run log: %w", err)
	}
	h := &countingHandler{Handler: slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}), warnings: new(atomic.Int64)}
	return slog.New(h), func() (string, int64) {
		f.Close()
		return path, h.warnings.Load()
	}, nil
}

// countingHandler counts the records at warning level or above it
// passes on.
type countingHandler struct {
	slog.Handler
	warnings *atomic.Int64
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warnings.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(attrs), warnings: h.warnings}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), warnings: h.warnings}
}

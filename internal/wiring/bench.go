package wiring

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
)

// BenchAPI is an API-only server (no workers) over a fresh store in a
// temporary directory, on a loopback port: what `agentbox bench api`
// drives. Close stops it and removes the directory.
type BenchAPI struct {
	URL, Token string
	closers
}

// OpenBenchAPI starts a BenchAPI.
func OpenBenchAPI(ctx context.Context, cfg config.Config) (*BenchAPI, error) {
	dir, err := os.MkdirTemp("", "agentbox-bench-")
	if err != nil {
		return nil, err
	}
	b := &BenchAPI{Token: "bench-token"}
	b.add(func() error { return os.RemoveAll(dir) })
	if err := b.serve(ctx, cfg, dir); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *BenchAPI) serve(ctx context.Context, cfg config.Config, dir string) error {
	j, err := openJobs(ctx, cfg, nil, jobsConfig{dir: dir, maxAttempts: 3})
	if err != nil {
		return err
	}
	b.add(j.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.New(api.Config{Tokens: []string{b.Token}}, j.service, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	b.add(func() error {
		err := srv.Close()
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			return serr
		}
		return err
	})
	b.URL = "http://" + l.Addr().String()
	return nil
}

package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store"
)

// The Run* functions below are the bench subcommands: each opens what it
// measures, measures it, and writes the results to out as a Markdown
// table, notes along the way to notes.

// RunBenchTier is `agentbox bench`: the sandbox rows on the tier
// isolation, then the memory of an idle sandbox.
func RunBenchTier(ctx context.Context, cfg config.Config, log *slog.Logger, o bench.Options, isolation string, out, notes io.Writer) error {
	return BenchSandboxes(cfg, log, &o, notes, func() error {
		head, closeAll, err := BenchTier(ctx, cfg, log, &o, isolation)
		defer closeAll()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n\n", head)
		rows, err := bench.Run(ctx, o)
		if err != nil {
			return err
		}
		bench.Markdown(out, rows)
		idle, err := bench.Idle(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintln(out)
		bench.IdleMarkdown(out, idle)
		return nil
	})
}

// RunBenchGUI is `agentbox bench gui`: the desktop and notebook stack.
func RunBenchGUI(ctx context.Context, cfg config.Config, log *slog.Logger, o bench.Options, out, notes io.Writer) error {
	return BenchSandboxes(cfg, log, &o, notes, func() error {
		r, err := bench.GUI(ctx, o)
		if err == nil {
			bench.GUIMarkdown(out, r)
		}
		return err
	})
}

// RunBenchAPI is `agentbox bench api`: durable creates and status reads
// on an API-only server.
func RunBenchAPI(ctx context.Context, cfg config.Config, o bench.LoadOptions, out io.Writer) error {
	srv, err := OpenBenchAPI(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	o.URL, o.Token = srv.URL, srv.Token
	rs, err := bench.Load(ctx, o)
	if err != nil {
		return err
	}
	bench.LoadMarkdown(out, rs)
	return nil
}

// RunBenchUI is `agentbox bench ui`: the web UI's pages over a large store.
func RunBenchUI(ctx context.Context, cfg config.Config, o bench.UIOptions, out io.Writer) error {
	var big string
	fill := func(ctx context.Context, st store.Store) (err error) {
		big, err = bench.FillUI(ctx, st, o)
		return err
	}
	srv, err := OpenBenchUI(ctx, cfg, fill)
	if err != nil {
		return err
	}
	defer srv.Close()
	rows, err := bench.UI(ctx, srv.URL, srv.Token, big, o)
	if err != nil {
		return err
	}
	bench.UIMarkdown(out, o, rows)
	return nil
}

// RunBenchUpload is `agentbox bench upload`: jobs started from an
// uploaded project against docker cp.
func RunBenchUpload(ctx context.Context, cfg config.Config, o bench.UploadOptions, out, notes io.Writer) error {
	srv, err := OpenBenchServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	o.URL, o.Token, o.Image, o.Log = srv.URL, srv.Token, cfg.Sandbox.Image, notes
	rows, err := bench.Upload(ctx, o)
	if err == nil {
		bench.Markdown(out, rows)
	}
	return err
}

// RunBenchStore is `agentbox bench store`: SQLite and PostgreSQL (at
// pgURL, else a local server) side by side.
func RunBenchStore(ctx context.Context, pgURL string, o bench.StoreOptions, out, notes io.Writer) error {
	stores, closeAll, err := BenchStores(ctx, pgURL)
	if err != nil {
		return err
	}
	defer closeAll()
	rs, err := bench.StoreEach(ctx, stores, o, notes)
	if err != nil {
		return err
	}
	bench.StoreMarkdown(out, o, rs)
	return nil
}

// RunBenchDrain is `agentbox bench drain`: a cluster draining a queue.
// Not every job ending complete is an error.
func RunBenchDrain(ctx context.Context, cfg config.Config, o bench.DrainOptions, out io.Writer) error {
	c, err := OpenBenchCluster(ctx, cfg, o.Workers, o.Concurrency)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := bench.Drain(ctx, c.URL, c.Token, o)
	if err != nil {
		return err
	}
	bench.DrainMarkdown(out, o, r)
	if r.Complete != o.Jobs {
		return fmt.Errorf("%d of %d jobs ended complete", r.Complete, o.Jobs)
	}
	return nil
}

// RunBenchCheckpoint is `agentbox bench checkpoint`: an incremental
// checkpoint against docker exec tar.
func RunBenchCheckpoint(ctx context.Context, cfg config.Config, o CheckpointBenchOptions, out, notes io.Writer) error {
	o.Image, o.Log = cfg.Sandbox.Image, notes
	r, err := BenchCheckpoint(ctx, o)
	if err != nil {
		return err
	}
	CheckpointMarkdown(out, o, r)
	return nil
}

package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
)

// BuildImage builds the sandbox image on cfg's engine: opts.Ref, or else
// cfg's image; what it built, if anything, is said on opts.Progress.
func BuildImage(ctx context.Context, cfg config.Config, opts image.Options) error {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return err
	}
	defer cli.Close()
	if opts.Ref == "" {
		opts.Ref = cfg.Sandbox.Image
	}
	res, err := image.Build(ctx, cli, opts)
	if err == nil && res.Built {
		fmt.Fprintf(opts.Progress, "built %s %s\n", res.Ref, res.ID)
	}
	return err
}

// InspectLayers says whether the sandbox image ref (cfg's image if empty)
// and its core are on cfg's engine and current.
func InspectLayers(ctx context.Context, cfg config.Config, ref string) (image.Layers, error) {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return image.Layers{}, err
	}
	defer cli.Close()
	if ref == "" {
		ref = cfg.Sandbox.Image
	}
	return image.InspectLayers(ctx, cli, ref)
}

// BuildUserImage builds a user's image on top of cfg's sandbox image
// (image.BuildUser), never over the sandbox image's own tag, and says on
// opts.Progress what it built and whether jobs may ask for it.
func BuildUserImage(ctx context.Context, cfg config.Config, opts image.UserOptions) error {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return err
	}
	defer cli.Close()
	opts.Base = cfg.Sandbox.Image
	opts.Protected = []string{cfg.Sandbox.Image, config.DefaultImage}
	res, err := image.BuildUser(ctx, cli, opts)
	if err == nil {
		image.WriteUserResult(opts.Progress, res, cfg.Sandbox.AllowedImages(), cfg.Sandbox.Images)
	}
	return err
}

// newGate returns the image.Gate of cfg's sandbox image, which runs
// sandboxes on the core while the desktop layer builds, or nil when the
// driver is not Docker's (the microVM tier converts the full image).
// start begins the layer's build at once when it is missing (a server);
// otherwise the first job that needs it does. The build's output goes to
// <data dir>/image-build.log.
func newGate(ctx context.Context, cfg config.Config, log *slog.Logger, start bool) (*image.Gate, func(), error) {
	if cfg.Sandbox.Driver != "docker" {
		return nil, func() {}, nil
	}
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return nil, nil, err
	}
	g := image.NewGate(image.GateConfig{Engine: cli, Ref: cfg.Sandbox.Image, LogPath: filepath.Join(cfg.DataDir, "image-build.log"), Log: log})
	stop := func() {
		g.Close()
		cli.Close()
	}
	if start {
		if _, err := g.Start(ctx); err != nil {
			log.Warn("could not tell whether the desktop image layer is built", "err", err)
		}
	}
	return g, stop, nil
}

// scratchImage is the image of a scratch sandbox (exec) that names none:
// the core while the desktop layer is missing (image.Gate).
func scratchImage(ctx context.Context, cfg config.Config, log *slog.Logger, ref string) (string, error) {
	g, stop, err := newGate(ctx, cfg, log, false)
	if err != nil || g == nil {
		return ref, err
	}
	defer stop()
	return g.Image(ctx, ref, false, nil)
}

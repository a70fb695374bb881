package wiring

import (
	"context"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
)

// BuildImage builds the sandbox image on cfg's engine: opts.Ref, or else
// cfg's image.
func BuildImage(ctx context.Context, cfg config.Config, opts image.Options) (image.Result, error) {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return image.Result{}, err
	}
	defer cli.Close()
	if opts.Ref == "" {
		opts.Ref = cfg.Sandbox.Image
	}
	return image.Build(ctx, cli, opts)
}

// InspectImage says whether the image ref (cfg's image if empty) is on
// cfg's engine and current; it returns the ref it looked at.
func InspectImage(ctx context.Context, cfg config.Config, ref string) (string, image.Status, error) {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return ref, image.Status{}, err
	}
	defer cli.Close()
	if ref == "" {
		ref = cfg.Sandbox.Image
	}
	st, err := image.Inspect(ctx, cli, ref)
	return ref, st, err
}

// BuildUserImage builds a user's image on top of cfg's sandbox image
// (image.BuildUser), never over the sandbox image's own tag.
func BuildUserImage(ctx context.Context, cfg config.Config, opts image.UserOptions) (image.UserResult, error) {
	cli, err := DockerClient(cfg.Docker)
	if err != nil {
		return image.UserResult{}, err
	}
	defer cli.Close()
	opts.Base = cfg.Sandbox.Image
	opts.Protected = []string{cfg.Sandbox.Image, config.DefaultImage}
	return image.BuildUser(ctx, cli, opts)
}

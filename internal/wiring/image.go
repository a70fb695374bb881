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

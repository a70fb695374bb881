package doctor

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/internal/image"
)

// imagesCheck says whether the images AGENTBOX_IMAGES allows are on the
// engine (nothing is pulled: a job naming a missing one ends in error) and
// built on the current sandbox image. Nil when none is listed.
func (d doctor) imagesCheck(ctx context.Context, cli client.APIClient) []Check {
	if len(d.cfg.Sandbox.Images) == 0 {
		return nil
	}
	base, _ := cli.ImageInspect(ctx, d.cfg.Sandbox.Image)
	var missing, stale, ok []string
	for _, ref := range d.cfg.Sandbox.Images {
		info, err := cli.ImageInspect(ctx, ref)
		switch {
		case cerrdefs.IsNotFound(err):
			missing = append(missing, ref)
		case err != nil:
			return []Check{{"images", Fail, fmt.Sprintf("inspect %s: %v", ref, err), ""}}
		case info.Config == nil || base.ID == "" || info.Config.Labels[image.LabelBase] != base.ID:
			stale = append(stale, ref)
		default:
			ok = append(ok, ref)
		}
	}
	detail := fmt.Sprintf("AGENTBOX_IMAGES: %d on the engine built on the current sandbox image", len(ok))
	if len(stale) > 0 {
		detail += "; built on another sandbox image: " + strings.Join(stale, ", ")
	}
	if len(missing) > 0 {
		return []Check{{"images", Warn, detail + "; missing (jobs asking for them end in error): " + strings.Join(missing, ", "),
			"agentbox image build --dockerfile PATH --tag " + missing[0]}}
	}
	if len(stale) > 0 {
		return []Check{{"images", Warn, detail, "agentbox image build --dockerfile PATH --tag " + stale[0] + "   (again)"}}
	}
	return []Check{{"images", OK, detail, ""}}
}

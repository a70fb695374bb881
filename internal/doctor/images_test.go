package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dimage "github.com/docker/docker/api/types/image"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestImagesCheck needs Docker: the images AGENTBOX_IMAGES lists are
// reported missing, built on another sandbox image, or fine.
func TestImagesCheck(t *testing.T) {
	cli := testenv.DockerWithImage(t)
	suffix := strconv.Itoa(os.Getpid())
	built, retagged, missing := "agentbox-test-doctor-built-"+suffix+":latest", "agentbox-test-doctor-retag-"+suffix+":latest", "agentbox-test-doctor-missing-"+suffix+":latest"
	df := filepath.Join(t.TempDir(), "Dockerfile")
	os.WriteFile(df, []byte("ARG BASE\nFROM $BASE\n"), 0o644)
	t.Cleanup(func() {
		for _, ref := range []string{built, retagged} {
			cli.ImageRemove(context.Background(), ref, dimage.RemoveOptions{PruneChildren: true})
		}
	})
	if _, err := image.BuildUser(t.Context(), cli, image.UserOptions{Dockerfile: df, Ref: built, Base: testenv.Image()}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ImageTag(t.Context(), testenv.Image(), retagged); err != nil {
		t.Fatal(err)
	}
	d := doctor{cfg: config.Default()}
	d.cfg.Sandbox.Image = testenv.Image()
	d.cfg.Sandbox.Images = []string{built}
	if c := d.imagesCheck(t.Context(), cli); len(c) != 1 || c[0].Status != OK {
		t.Errorf("a current image: %+v", c)
	}
	d.cfg.Sandbox.Images = []string{built, retagged, missing}
	c := d.imagesCheck(t.Context(), cli)
	if len(c) != 1 || c[0].Status != Warn || !strings.Contains(c[0].Detail, "1 on the engine") ||
		!strings.Contains(c[0].Detail, "another sandbox image: "+retagged) || !strings.Contains(c[0].Detail, "missing (jobs asking for them end in error): "+missing) ||
		c[0].Fix != "agentbox image build --dockerfile PATH --tag "+missing {
		t.Errorf("images check: %+v", c)
	}
	d.cfg.Sandbox.Images = nil
	if c := d.imagesCheck(t.Context(), cli); c != nil {
		t.Errorf("no AGENTBOX_IMAGES: %+v", c)
	}
}

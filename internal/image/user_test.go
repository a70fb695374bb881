package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/testenv"
)

// userDockerfile has one RUN step, in a stage of its own, and copies the
// context; it sets a USER that sandboxes override.
const userDockerfile = `ARG BASE
FROM $BASE AS build
LABEL io.agentbox.test=user-build-stage
RUN echo built-in-a-step > /tmp/out
FROM $BASE
COPY --from=build /tmp/out /opt/built
COPY . /opt/ctx/
USER root
`

// TestBuildUserImage needs Docker and the sandbox image: it builds a small
// image on top of it from a directory with a .dockerignore and a link
// leading out, and checks what the image holds.
func TestBuildUserImage(t *testing.T) {
	cli := testenv.DockerWithImage(t)
	base := testenv.Image()
	dir := t.TempDir()
	write := func(name, text string) { os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
	write("Dockerfile.ml", userDockerfile)
	write("hello.txt", "hello\n")
	write("secret.txt", "do not send\n")
	write(".dockerignore", "secret.txt\nDockerfile.ml\n")
	hostSecret := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(hostSecret, []byte("host only\n"), 0o600)
	os.Symlink(hostSecret, filepath.Join(dir, "leak"))
	ref := "agentbox-test-user-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
		removeBuildStages(t, cli)
	})

	var progress bytes.Buffer
	// Without the cache: the legacy builder's cache does not key on a
	// link's target, so an earlier run's link would come back.
	res, err := BuildUser(t.Context(), cli, UserOptions{Dockerfile: filepath.Join(dir, "Dockerfile.ml"), Ref: ref, Base: base,
		Protected: []string{base}, Progress: &progress, NoCache: true})
	if err != nil {
		t.Fatalf("build: %v\n%s", err, progress.String())
	}
	if res.Ref != ref+":latest" || !strings.Contains(progress.String(), "Step 2/") || !strings.Contains(progress.String(), "build context "+dir) {
		t.Errorf("result %+v, progress:\n%s", res, progress.String())
	}
	if !strings.Contains(strings.Join(res.Overridden, "\n"), "USER root") {
		t.Errorf("overridden %q lacks the USER", res.Overridden)
	}
	info, err := cli.ImageInspect(t.Context(), ref)
	baseInfo, _ := cli.ImageInspect(t.Context(), base)
	if err != nil || info.Config.Labels[LabelBase] != baseInfo.ID {
		t.Errorf("label %s = %q, want the sandbox image's ID %s (%v)", LabelBase, info.Config.Labels[LabelBase], baseInfo.ID, err)
	}
	code, out := runInImage(t, cli, ref, "cat /opt/built /opt/ctx/hello.txt; ls -A /opt/ctx; readlink /opt/ctx/leak; cat /opt/ctx/leak 2>/dev/null || echo no-content")
	want := "built-in-a-step\nhello\n.dockerignore\nhello.txt\nleak\n" + hostSecret + "\nno-content\n"
	if code != 0 || out != want {
		t.Errorf("in the image (exit %d):\n%s\nwant:\n%s", code, out, want)
	}
}

// TestBuildUserImageRefusals: nothing is built for a protected tag, a
// Dockerfile that would pull, or a missing sandbox image.
func TestBuildUserImageRefusals(t *testing.T) {
	cli := testenv.DockerWithImage(t)
	base := testenv.Image()
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile")
	for name, tt := range map[string]struct{ dockerfile, ref, base, want string }{
		"the sandbox tag":   {"ARG BASE\nFROM $BASE\n", "agentbox-sandbox", base, "the sandbox image's own tag"},
		"the default tag":   {"ARG BASE\nFROM $BASE\n", config.DefaultImage, base, "the sandbox image's own tag"},
		"a Debian base tag": {"ARG BASE\nFROM $BASE\n", BaseRepo + ":bookworm-0123456789ab", base, "Debian bases"},
		"no tag":            {"ARG BASE\nFROM $BASE\n", "", base, "--tag"},
		"another base":      {"FROM debian:bookworm-slim\n", "agentbox-test-refused", base, "FROM " + base},
		"missing sandbox":   {"ARG BASE\nFROM $BASE\n", "agentbox-test-refused", "agentbox-no-such-sandbox:x", "agentbox image build"},
		"volume in the ws":  {"ARG BASE\nFROM $BASE\nVOLUME /workspace/cache\n", "agentbox-test-refused", base, "/workspace/cache"},
		"not a Dockerfile":  {"", "agentbox-test-refused", base, "no FROM"},
		"device for a file": {"-", "agentbox-test-refused", base, "regular file"},
	} {
		t.Run(name, func(t *testing.T) {
			path := df
			if tt.dockerfile == "-" {
				path = "/dev/null"
			} else {
				os.WriteFile(df, []byte(tt.dockerfile), 0o644)
			}
			_, err := BuildUser(t.Context(), cli, UserOptions{Dockerfile: path, Ref: tt.ref, Base: tt.base, Protected: []string{base, config.DefaultImage}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if _, err := cli.ImageInspect(t.Context(), "agentbox-test-refused"); err == nil {
				cli.ImageRemove(t.Context(), "agentbox-test-refused", image.RemoveOptions{Force: true, PruneChildren: true})
				t.Errorf("a refused image was left on the engine")
			}
		})
	}
}

// removeBuildStages removes the images the legacy builder left of the
// test's first stage, which the image it tagged does not hold.
func removeBuildStages(t *testing.T, cli *client.Client) {
	f := filters.NewArgs(filters.Arg("dangling", "true"), filters.Arg("label", "io.agentbox.test=user-build-stage"))
	imgs, err := cli.ImageList(context.Background(), image.ListOptions{Filters: f})
	if err != nil {
		t.Errorf("list build stages: %v", err)
	}
	for _, img := range imgs {
		cli.ImageRemove(context.Background(), img.ID, image.RemoveOptions{PruneChildren: true})
	}
}

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestImageBuildDockerfileAndRunInIt builds a user's image with `image
// build --dockerfile` and does a job in it with `run --image`: refused
// until the image is in AGENTBOX_IMAGES, then the job sees the file the
// image's RUN step wrote. A job naming an allowed image the engine lacks
// ends in error saying how to build it.
func TestImageBuildDockerfileAndRunInIt(t *testing.T) {
	instance := sandboxEnv(t)
	t.Setenv("AGENTBOX_AGENT", "shell")
	t.Setenv("AGENTBOX_IMAGES", "")
	tag := "agentbox-test-cli-" + strconv.Itoa(os.Getpid())
	cli := testenv.Docker(t)
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	df := filepath.Join(t.TempDir(), "Dockerfile")
	os.WriteFile(df, []byte("ARG BASE\nFROM $BASE\nUSER root\nRUN echo from-the-user-image > /opt/marker\n"), 0o644)

	out, errOut, err := run(context.Background(), "image", "build", "--dockerfile", df, "--tag", tag)
	if err != nil {
		t.Fatalf("image build: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"Step 4/5 : RUN echo from-the-user-image", "built " + tag + ":latest sha256:",
		"add " + tag + ":latest to AGENTBOX_IMAGES", "AGENTBOX_IMAGES=" + tag + ":latest"} {
		if !strings.Contains(out, want) {
			t.Errorf("image build output lacks %q:\n%s", want, out)
		}
	}

	_, _, err = run(context.Background(), "run", "--image", tag, "cat /opt/marker")
	if err == nil || !strings.Contains(err.Error(), "allowed images: "+config.DefaultImage) {
		t.Fatalf("run --image before AGENTBOX_IMAGES lists it: %v", err)
	}

	t.Setenv("AGENTBOX_IMAGES", tag+",agentbox-test-missing-"+strconv.Itoa(os.Getpid()))
	out, errOut, err = run(context.Background(), "run", "--image", tag+":latest", "cat /opt/marker")
	if err != nil || !strings.Contains(out, "from-the-user-image") {
		t.Fatalf("run --image: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	_, errOut, err = run(context.Background(), "run", "--image", "agentbox-test-missing-"+strconv.Itoa(os.Getpid()), "true")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 ||
		!strings.Contains(errOut, "agentbox image build --dockerfile PATH --tag agentbox-test-missing-"+strconv.Itoa(os.Getpid())+":latest") {
		t.Errorf("run in a missing image: %v\n%s", err, errOut)
	}
	assertNoSandboxes(t, instance)
}

func TestImageBuildDockerfileFlags(t *testing.T) {
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "build", "--dockerfile", "Dockerfile"}, "needs --tag NAME"},
		{[]string{"image", "build", "--dockerfile", "Dockerfile", "--tag", "x", "--from", "archive"}, "--from is for the sandbox image"},
		{[]string{"image", "build", "--dockerfile", "/no/such/Dockerfile", "--tag", "x"}, "--dockerfile"},
		{[]string{"image", "build", "--dockerfile", "Dockerfile", "--tag", config.DefaultImage}, "the sandbox image's own tag"},
	} {
		if _, _, err := run(context.Background(), tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}

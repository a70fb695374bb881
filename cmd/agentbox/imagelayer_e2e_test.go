package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestJobWaitsForDesktopLayer is a new installation whose desktop layer
// is not built yet: the sandbox image is absent, its core is current. The
// core stands in for a real one (the sandbox image, labelled as the
// current core) with an apt-get that fails after a while, so the server's
// real build of the desktop layer runs and fails without the network.
// A model-agent job (computer and python tools) waits for the layer,
// saying so in its log while it runs, then ends in error with the build's
// failure; a shell job on the same installation runs on the core at once,
// and `image inspect` says which layer is ready.
func TestJobWaitsForDesktopLayer(t *testing.T) {
	cli := testenv.DockerWithImage(t)
	ref := "agentbox-test-layer-" + strconv.Itoa(os.Getpid()) + ":latest"
	core := image.CoreRef(ref)
	buildFakeCore(t, cli, core)

	s, _ := newModelServer(t, "anthropic", llmtest.Script{}, "AGENTBOX_IMAGE="+ref)
	s.start()
	id := s.submitJob(t, map[string]any{"task": "take a screenshot"})
	var waitMsg string
	waitUntil(t, 2*time.Minute, func() bool {
		waitMsg = logMessage(s.events(id), "waiting for the desktop image layer")
		return waitMsg != ""
	})
	if !strings.HasPrefix(waitMsg, "waiting for the desktop image layer to finish building (started ") ||
		!strings.Contains(waitMsg, "image-build.log") {
		t.Errorf("wait message %q", waitMsg)
	}
	if j := s.job(id); j.Status != "running" {
		t.Errorf("job %s while it waits; want running", j.Status)
	}
	final := s.awaitFinal([]string{id})[id]
	if final.Status != "error" || !strings.Contains(final.Error, "the desktop image layer failed to build") ||
		!strings.Contains(final.Error, "agentbox test: no apt-get here") {
		t.Fatalf("job ended %s: %q; want an error saying the layer's build failed, with its output", final.Status, final.Error)
	}
	for _, ev := range s.events(id) {
		if ev.Type == "sandbox" {
			t.Errorf("the job got a sandbox without the desktop layer: %s", ev.Payload)
		}
	}

	shell := newServer(t, "AGENTBOX_IMAGE="+ref)
	shell.start()
	j := shell.runJob(t, "echo on-the-core", nil)
	if j.Status != "complete" {
		t.Fatalf("shell job on the core: %+v\n%s", j, shell.logs)
	}
	if msg := logMessage(shell.events(j.JobID), "waiting for the desktop"); msg != "" {
		t.Errorf("a job without the desktop waited: %q", msg)
	}

	t.Setenv("AGENTBOX_IMAGE", ref)
	out, _, err := run(context.Background(), "image", "inspect")
	if ee, ok := err.(exitError); !ok || ee.code != 1 {
		t.Errorf("image inspect with the desktop layer missing: %v, want exit 1", err)
	}
	for _, want := range []string{"core:    " + core + " ready\n", "desktop: missing: sandboxes run on the core"} {
		if !strings.Contains(out, want) {
			t.Errorf("image inspect output lacks %q:\n%s", want, out)
		}
	}
}

// buildFakeCore tags as ref an image of the sandbox image labelled as the
// current core, whose apt-get says it is absent and fails after 10s.
func buildFakeCore(t *testing.T, cli *client.Client, ref string) {
	t.Helper()
	t.Cleanup(func() { removeWithDescendants(cli, ref) })
	df := fmt.Sprintf("FROM %s\nUSER root\nCOPY apt-get /usr/local/bin/apt-get\nUSER 1000:1000\n", testenv.Image())
	aptGet := "#!/bin/sh\necho 'agentbox test: no apt-get here' >&2\nsleep 10\nexit 100\n"
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range []struct {
		name, data string
		mode       int64
	}{{"Dockerfile", df, 0o644}, {"apt-get", aptGet, 0o755}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))})
		tw.Write([]byte(f.data))
	}
	tw.Close()
	resp, err := cli.ImageBuild(t.Context(), &ctxTar, build.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true,
		Labels: map[string]string{image.LabelHash: sandboximage.CoreHash(), image.LabelLayer: image.LayerCore}, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ls, err := image.InspectLayers(t.Context(), cli, strings.TrimSuffix(ref, "-core:latest")+":latest"); err != nil || !ls.Core.Current || ls.Full.Present {
		t.Fatalf("fake core %s: %+v, %v\n%s", ref, ls, err, out)
	}
}

// removeWithDescendants removes ref and the images built on it that the
// servers' failed builds of the desktop layer left as the legacy
// builder's cache, newest first; ref's own untagged parents go with it.
func removeWithDescendants(cli *client.Client, ref string) {
	ctx := context.Background()
	info, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return
	}
	all, err := cli.ImageList(ctx, dimage.ListOptions{All: true})
	if err != nil {
		return
	}
	children := map[string][]string{}
	for _, im := range all {
		children[im.ParentID] = append(children[im.ParentID], im.ID)
	}
	var order []string
	for queue := []string{info.ID}; len(queue) > 0; queue = queue[1:] {
		order = append(order, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	for i := len(order) - 1; i > 0; i-- {
		cli.ImageRemove(ctx, order[i], dimage.RemoveOptions{})
	}
	cli.ImageRemove(ctx, ref, dimage.RemoveOptions{Force: true, PruneChildren: true})
}

// logMessage returns the first log event's message containing want.
func logMessage(events []eventDTO, want string) string {
	for _, ev := range events {
		var p struct{ Message string }
		if ev.Type == "log" && json.Unmarshal(ev.Payload, &p) == nil && strings.Contains(p.Message, want) {
			return p.Message
		}
	}
	return ""
}

package image

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
)

func TestCoreRef(t *testing.T) {
	for ref, want := range map[string]string{
		"agentbox-sandbox:latest":          "agentbox-sandbox-core:latest",
		"agentbox-sandbox":                 "agentbox-sandbox-core:latest",
		"registry.local:5000/team/sb:v2":   "registry.local:5000/team/sb-core:v2",
		"registry.local:5000/team/sb":      "registry.local:5000/team/sb-core:latest",
		"agentbox-sandbox@sha256:0123abcd": "agentbox-sandbox@sha256:0123abcd",
	} {
		if got := CoreRef(ref); got != want {
			t.Errorf("CoreRef(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestBuildLayers checks which images a build makes: the full image is
// the core, built from the core's files alone, and the desktop layer on
// top of it (BASE is the core, nothing else pulled or prepared).
func TestBuildLayers(t *testing.T) {
	f := newFake(t)
	res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry})
	if err != nil || !res.Built || res.Core == nil || !res.Core.Built {
		t.Fatalf("Build = %+v, %v; want both layers built", res, err)
	}
	if len(f.builds) != 2 {
		t.Fatalf("%d builds, want the core's and the desktop layer's", len(f.builds))
	}
	core, full := f.builds[0], f.builds[1]
	if core.Tags[0] != "img-core:t" || core.Dockerfile != sandboximage.CoreDockerfile || core.Labels[LabelLayer] != LayerCore {
		t.Errorf("first build %+v: want the core", core)
	}
	if got := slices.Sorted(maps.Keys(f.contexts[0])); !slices.Equal(got, slices.Sorted(slices.Values(sandboximage.CoreFiles))) {
		t.Errorf("core build context %v, want %v", got, sandboximage.CoreFiles)
	}
	if b := full.BuildArgs["BASE"]; full.Tags[0] != "img:t" || b == nil || *b != "img-core:t" || full.Labels[LabelLayer] != LayerDesktop {
		t.Errorf("second build %+v: want the desktop layer on img-core:t", full)
	}
	if !strings.Contains(f.contexts[1]["Dockerfile"], "FROM ${BASE}") || f.contexts[1]["jupyter-server"] == "" {
		t.Errorf("desktop build context lacks its Dockerfile or jupyter-server: %v", slices.Collect(maps.Keys(f.contexts[1])))
	}

	// A current full image needs no core of its own to be up to date.
	delete(f.images, "img-core:t")
	if res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry}); err != nil || res.Built || len(f.builds) != 2 {
		t.Fatalf("Build with the full image current, its core untagged = %+v, %v; want nothing built", res, err)
	}
	f.images["img-core:t"] = map[string]string{LabelHash: sandboximage.CoreHash()}
	// Both current: nothing runs. The core alone, current: nothing runs.
	for _, layer := range []string{LayerDesktop, LayerCore} {
		res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry, Layer: layer})
		if err != nil || res.Built || len(f.builds) != 2 {
			t.Fatalf("rebuild %s = %+v, %v after %d builds; want nothing built", layer, res, err, len(f.builds))
		}
	}
}

// TestBuildCoreOnly checks that --layer core builds the core and leaves
// the full image alone, and that the desktop layer then builds on it
// without building the core again.
func TestBuildCoreOnly(t *testing.T) {
	f := newFake(t)
	res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry, Layer: LayerCore})
	if err != nil || !res.Built || res.Ref != "img-core:t" || len(f.builds) != 1 {
		t.Fatalf("Build core = %+v, %v, %d builds", res, err, len(f.builds))
	}
	ls, err := InspectLayers(context.Background(), f, "img:t")
	if err != nil || !ls.Core.Current || ls.Full.Present || ls.CoreRef != "img-core:t" {
		t.Fatalf("InspectLayers = %+v, %v; want the core current, the full image absent", ls, err)
	}
	res, err = Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry})
	if err != nil || !res.Built || res.Core.Built || len(f.builds) != 2 || f.builds[1].Tags[0] != "img:t" {
		t.Fatalf("Build desktop = %+v, %v, builds %+v; want only the desktop layer built", res, err, f.builds)
	}
	if ls, _ := InspectLayers(context.Background(), f, "img:t"); !ls.Core.Current || !ls.Full.Current {
		t.Errorf("InspectLayers after both = %+v", ls)
	}
	if _, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry, Layer: "gui"}); err == nil || !strings.Contains(err.Error(), `unknown image layer "gui"`) {
		t.Errorf("unknown layer: %v", err)
	}
}

// Package image builds the agentbox sandbox image and tells whether the one
// on the engine is current, and builds users' images on top of it
// (BuildUser). It talks to the engine only through the Docker Go client
// (never the docker CLI), uses the legacy builder so that Docker 20.10 and
// Podman's compatible API both work, and has two ways to get a Debian
// base: pulled from a registry, or built from Debian's archive with
// mmdebstrap and imported, for hosts that cannot reach any registry.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
	"github.com/agentbox/agentbox/internal/config"
)

// LabelHash is the image label that records which definition
// (sandboximage.Hash, or sandboximage.CoreHash for a core image) an image
// was built from.
const LabelHash = "io.agentbox.image.hash"

// LabelLayer is the image label that says which layer an image is:
// LayerCore or LayerDesktop.
const LabelLayer = "io.agentbox.image.layer"

// The layers of the sandbox image, for Options.Layer. Each is an image:
// the core under CoreRef(ref), the full image (the core and the desktop
// and notebook layer on top) under ref itself.
const (
	LayerCore    = "core"    // Debian, Python, Node.js, git, build tools
	LayerDesktop = "desktop" // the full image: the core and Xvfb, noVNC, Jupyter on top
)

// DefaultMirror is the Debian archive used when Options.Mirror is empty.
const DefaultMirror = "http://deb.debian.org/debian"

// The ways to get a base image, for Options.From.
const (
	FromAuto     = "auto"     // archive if mmdebstrap is installed, else registry
	FromRegistry = "registry" // the engine pulls debian:bookworm-slim
	FromArchive  = "archive"  // mmdebstrap from the Debian archive, imported
)

// Engine is the part of the Docker client this package uses;
// *client.Client implements it.
type Engine interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

var _ Engine = (*client.Client)(nil)

// Options says what to build and how.
type Options struct {
	// Ref is the tag to build; default config.DefaultImage.
	Ref string
	// From is FromAuto (default), FromRegistry or FromArchive.
	From string
	// Force rebuilds even when the image is current, without the build
	// cache, and (for FromArchive) re-runs mmdebstrap.
	Force bool
	// Mirror is the Debian archive for FromArchive; default DefaultMirror.
	Mirror string
	// Layer is LayerDesktop (default: the full image, and the core first
	// if it is not current) or LayerCore (the core alone).
	Layer string
	// Progress receives readable build output; nil discards it.
	Progress io.Writer
}

// Result describes the image Build left on the engine: the layer asked for.
type Result struct {
	Ref  string
	ID   string
	Hash string // the definition hash the image is labelled with
	// Built is false when the image was already current and nothing ran.
	Built bool
	// Core is the core image's result when the full image was asked for.
	Core *Result
}

// Status describes an image on the engine.
type Status struct {
	Present bool
	// Current reports that the image was built from this binary's definition.
	Current bool
	Hash    string // the image's LabelHash, empty if absent
	ID      string
}

// Build makes sure the layer opts asks for exists and was built from the
// embedded definition, building it if not (or if opts.Force): the core
// under CoreRef(opts.Ref), then, for LayerDesktop, the full image under
// opts.Ref on top of it.
func Build(ctx context.Context, cli Engine, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := checkFrom(opts.From); err != nil {
		return Result{}, err
	}
	if err := checkLayer(opts.Layer); err != nil {
		return Result{}, err
	}
	if opts.Layer == LayerDesktop && !opts.Force {
		// A current full image holds the core: nothing to build, even
		// if the core's own tag is gone.
		if st, err := Inspect(ctx, cli, opts.Ref); err != nil || st.Current {
			if err == nil {
				fmt.Fprintf(opts.Progress, "image %s is up to date (%s)\n", opts.Ref, shortHash(sandboximage.Hash()))
			}
			return Result{Ref: opts.Ref, ID: st.ID, Hash: sandboximage.Hash()}, err
		}
	}
	core, err := buildLayer(ctx, cli, coreLayer(opts.Ref), opts)
	if err != nil || opts.Layer == LayerCore {
		return core, err
	}
	full, err := buildLayer(ctx, cli, fullLayer(opts.Ref, core.Ref), opts)
	full.Core = &core
	return full, err
}

// buildLayer builds one layer unless it is current (and not opts.Force).
func buildLayer(ctx context.Context, cli Engine, l layer, opts Options) (Result, error) {
	st, err := inspect(ctx, cli, l.ref, l.hash)
	if err != nil {
		return Result{}, err
	}
	res := Result{Ref: l.ref, ID: st.ID, Hash: l.hash}
	if st.Current && !opts.Force {
		fmt.Fprintf(opts.Progress, "image %s is up to date (%s)\n", l.ref, shortHash(res.Hash))
		return res, nil
	}
	base := l.base
	if base == "" {
		from, err := chooseFrom(opts.From, exec.LookPath)
		if err != nil {
			return Result{}, err
		}
		if base, err = prepareBase(ctx, cli, from, opts); err != nil {
			return Result{}, err
		}
	}
	if res.ID, err = buildImage(ctx, cli, l, base, opts); err != nil {
		return Result{}, err
	}
	res.Built = true
	return res, nil
}

// Inspect reports whether ref is on the engine and built from the embedded
// definition. A missing image is a Status, not an error.
func Inspect(ctx context.Context, cli Engine, ref string) (Status, error) {
	return inspect(ctx, cli, ref, sandboximage.Hash())
}

// Layers is the state of both layers of a sandbox image.
type Layers struct {
	Core, Full       Status
	CoreRef, FullRef string
}

// InspectLayers reports the state of the core (CoreRef(ref)) and the full
// image (ref).
func InspectLayers(ctx context.Context, cli Engine, ref string) (Layers, error) {
	ls := Layers{CoreRef: CoreRef(ref), FullRef: ref}
	var err error
	if ls.Full, err = Inspect(ctx, cli, ref); err != nil {
		return ls, err
	}
	ls.Core, err = inspect(ctx, cli, ls.CoreRef, sandboximage.CoreHash())
	return ls, err
}

// CoreRef names the core image of the sandbox image ref: "-core" added
// to its repository ("agentbox-sandbox:latest" has its core in
// "agentbox-sandbox-core:latest"). A ref by digest has no core of its own:
// CoreRef returns ref.
func CoreRef(ref string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	name, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	return name + "-core:" + tag
}

// inspect reports whether ref is on the engine and labelled with hash.
func inspect(ctx context.Context, cli Engine, ref, hash string) (Status, error) {
	info, err := cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return Status{}, nil
	}
	if err != nil {
		return Status{}, engineError(cli, fmt.Errorf("inspect image %s: %w", ref, err))
	}
	st := Status{Present: true, ID: info.ID}
	if info.Config != nil {
		st.Hash = info.Config.Labels[LabelHash]
	}
	st.Current = st.Hash == hash
	return st, nil
}

func (o Options) withDefaults() Options {
	if o.Ref == "" {
		o.Ref = config.DefaultImage
	}
	if o.From == "" {
		o.From = FromAuto
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.Layer == "" {
		o.Layer = LayerDesktop
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o
}

// ErrNoMmdebstrap means FromArchive was asked for on a host without mmdebstrap.
var ErrNoMmdebstrap = errors.New("mmdebstrap not found on PATH: install it (apt-get install mmdebstrap) or use --from registry")

// checkFrom rejects an unknown Options.From before anything runs.
func checkFrom(from string) error {
	switch from {
	case FromAuto, FromArchive, FromRegistry:
		return nil
	}
	return fmt.Errorf("unknown image source %q: want %s, %s or %s", from, FromAuto, FromRegistry, FromArchive)
}

// checkLayer rejects an unknown Options.Layer.
func checkLayer(l string) error {
	if l == LayerCore || l == LayerDesktop {
		return nil
	}
	return fmt.Errorf("unknown image layer %q: want %s or %s", l, LayerCore, LayerDesktop)
}

// chooseFrom resolves FromAuto and checks that the chosen way can work here.
func chooseFrom(from string, lookPath func(string) (string, error)) (string, error) {
	_, lookErr := lookPath("mmdebstrap")
	switch from {
	case FromAuto:
		if lookErr == nil {
			return FromArchive, nil
		}
		return FromRegistry, nil
	case FromArchive:
		if lookErr != nil {
			return "", ErrNoMmdebstrap
		}
		return FromArchive, nil
	case FromRegistry:
		return FromRegistry, nil
	}
	return "", checkFrom(from)
}

// prepareBase returns the BASE build argument: empty for the Dockerfile's
// default (registry), or the tag of a base imported from the archive.
func prepareBase(ctx context.Context, cli Engine, from string, opts Options) (string, error) {
	if from != FromArchive {
		fmt.Fprintln(opts.Progress, "base: debian:bookworm-slim from the engine's registry")
		return "", nil
	}
	start := time.Now()
	tag, built, err := ensureBase(ctx, cli, opts)
	if err != nil {
		return "", err
	}
	if built {
		fmt.Fprintf(opts.Progress, "base %s imported in %s\n", tag, time.Since(start).Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(opts.Progress, "base %s already present\n", tag)
	}
	return tag, nil
}

// engineError explains an unreachable engine; other errors pass unchanged.
func engineError(cli Engine, err error) error {
	if !client.IsErrConnectionFailed(err) {
		return err
	}
	host := "the default socket"
	if h, ok := cli.(interface{ DaemonHost() string }); ok {
		host = h.DaemonHost()
	}
	return fmt.Errorf("container engine not reachable at %s (is Docker running? set DOCKER_HOST for another engine): %w", host, err)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

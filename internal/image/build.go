package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
)

// layer is one image of the sandbox image's two: what it is built from
// and where it goes.
type layer struct {
	name       string // LayerCore or LayerDesktop
	ref        string // the tag it gets
	dockerfile string
	files      []string // its build context
	hash       string   // the label it gets: the hash of its definition
	// base is the image it starts from (the core, for the desktop layer);
	// empty for the core, whose Debian base Build prepares.
	base string
}

func coreLayer(ref string) layer {
	return layer{name: LayerCore, ref: CoreRef(ref), dockerfile: sandboximage.CoreDockerfile,
		files: sandboximage.CoreFiles, hash: sandboximage.CoreHash()}
}

func fullLayer(ref, core string) layer {
	files, err := sandboximage.Files(sandboximage.FS)
	if err != nil {
		panic(err) // the embedded files are walked at build time of the binary's tests
	}
	return layer{name: LayerDesktop, ref: ref, dockerfile: "Dockerfile", files: files, hash: sandboximage.Hash(), base: core}
}

// buildImage runs the layer's Dockerfile on the engine's legacy builder,
// tags the result l.ref and returns its ID. base, when set, is the BASE
// build arg.
func buildImage(ctx context.Context, cli Engine, l layer, base string, opts Options) (string, error) {
	buildCtx, err := contextTar(sandboximage.FS, l.files)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(opts.Progress, "building the %s layer as %s\n", l.name, l.ref)
	start := time.Now()
	resp, err := cli.ImageBuild(ctx, buildCtx, buildOptions(l, base, opts))
	if err != nil {
		return "", engineError(cli, fmt.Errorf("build image %s: %w", l.ref, err))
	}
	defer resp.Body.Close()
	if _, err := decodeStream(resp.Body, opts.Progress); err != nil {
		return "", fmt.Errorf("build image %s: %w", l.ref, err)
	}
	st, err := inspect(ctx, cli, l.ref, l.hash)
	if err != nil {
		return "", err
	}
	if !st.Current {
		return "", fmt.Errorf("build image %s: finished but the image is not labelled %s=%s", l.ref, LabelHash, l.hash)
	}
	fmt.Fprintf(opts.Progress, "image %s built in %s (%s)\n", l.ref, time.Since(start).Round(100*time.Millisecond), shortHash(strings.TrimPrefix(st.ID, "sha256:")))
	return st.ID, nil
}

// buildOptions are the ImageBuild options for one layer's build. The host
// network lets RUN apt-get reach the archive without relying on the
// bridge's NAT.
func buildOptions(l layer, base string, opts Options) build.ImageBuildOptions {
	o := build.ImageBuildOptions{
		Tags:        []string{l.ref},
		Dockerfile:  l.dockerfile,
		Remove:      true,
		ForceRemove: true,
		NetworkMode: "host",
		NoCache:     opts.Force,
		Labels:      map[string]string{LabelHash: l.hash, LabelLayer: l.name},
		Version:     build.BuilderV1,
	}
	if base != "" {
		o.BuildArgs = map[string]*string{"BASE": &base}
	} else {
		// Only a registry base can be refreshed; an imported one has no registry.
		o.PullParent = opts.Force
	}
	return o
}

// contextTar returns the build context: the named regular files of fsys
// in an uncompressed tar, sorted, with fixed owners, modes and times so that the same
// files always give the same bytes. Embedded files have no modes; scripts
// (starting with "#!") are made executable, as COPY keeps the tar's mode.
func contextTar(fsys fs.FS, names []string) (*bytes.Reader, error) {
	names = slices.Sorted(slices.Values(names))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("build context: read %s: %w", name, err)
		}
		hdr := &tar.Header{Name: name, Mode: fileMode(data), Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return bytes.NewReader(buf.Bytes()), nil
}

func fileMode(data []byte) int64 {
	if bytes.HasPrefix(data, []byte("#!")) {
		return 0o755
	}
	return 0o644
}

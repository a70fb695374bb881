package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
)

// buildImage runs the Dockerfile on the engine's legacy builder, tags the
// result opts.Ref and returns its ID. base, when set, is the BASE build arg.
func buildImage(ctx context.Context, cli Engine, base string, opts Options) (string, error) {
	buildCtx, err := contextTar(sandboximage.FS)
	if err != nil {
		return "", err
	}
	start := time.Now()
	resp, err := cli.ImageBuild(ctx, buildCtx, buildOptions(base, opts))
	if err != nil {
		return "", engineError(cli, fmt.Errorf("build image %s: %w", opts.Ref, err))
	}
	defer resp.Body.Close()
	if _, err := decodeStream(resp.Body, opts.Progress); err != nil {
		return "", fmt.Errorf("build image %s: %w", opts.Ref, err)
	}
	st, err := Inspect(ctx, cli, opts.Ref)
	if err != nil {
		return "", err
	}
	if !st.Current {
		return "", fmt.Errorf("build image %s: finished but the image is not labelled %s=%s", opts.Ref, LabelHash, sandboximage.Hash())
	}
	fmt.Fprintf(opts.Progress, "image %s built in %s (%s)\n", opts.Ref, time.Since(start).Round(100*time.Millisecond), shortHash(strings.TrimPrefix(st.ID, "sha256:")))
	return st.ID, nil
}

// buildOptions are the ImageBuild options for one build. The host network
// lets RUN apt-get reach the archive without relying on the bridge's NAT.
func buildOptions(base string, opts Options) build.ImageBuildOptions {
	o := build.ImageBuildOptions{
		Tags:        []string{opts.Ref},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		NetworkMode: "host",
		NoCache:     opts.Force,
		Labels:      map[string]string{LabelHash: sandboximage.Hash()},
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

// contextTar returns the build context: every regular file of fsys in an
// uncompressed tar, with fixed owners, modes and times so that the same
// files always give the same bytes. Embedded files have no modes; scripts
// (starting with "#!") are made executable, as COPY keeps the tar's mode.
func contextTar(fsys fs.FS) (*bytes.Reader, error) {
	names, err := sandboximage.Files(fsys)
	if err != nil {
		return nil, err
	}
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

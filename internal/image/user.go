package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/go-units"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/imagename"
	sandboxdocker "github.com/agentbox/agentbox/internal/sandbox/docker"
)

// LabelBase is the label of a user's image that records the ID of the
// sandbox image it was built on.
const LabelBase = "io.agentbox.image.base"

// maxDockerfile bounds the Dockerfile read to check it.
const maxDockerfile = 1 << 20

// UserOptions says which user image BuildUser builds.
type UserOptions struct {
	// Dockerfile is the Dockerfile's path; its directory is the build
	// context.
	Dockerfile string
	// Ref is the tag to build.
	Ref string
	// Base is the sandbox image every stage starts from; the build sets
	// the BASE argument to it.
	Base string
	// Protected are tags BuildUser refuses to overwrite: the sandbox
	// image's.
	Protected []string
	// NoCache builds without the build cache.
	NoCache bool
	// Progress receives readable build output; nil discards it.
	Progress io.Writer
}

// UserResult describes the user image BuildUser built.
type UserResult struct {
	Ref string // normalized
	ID  string
	// Overridden names what the image sets that sandboxes override.
	Overridden []string
}

// BuildUser builds a user's image on top of the sandbox image from the
// Dockerfile opts names, without pulling anything: every stage starts
// from the sandbox image or an earlier stage (checkDockerfile), and the
// result is checked to hold the sandbox image's layers. RUN steps reach
// the network through the engine's default bridge, never the host's.
func BuildUser(ctx context.Context, cli Engine, opts UserOptions) (UserResult, error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	ref, err := userRef(opts.Ref, opts.Protected)
	if err != nil {
		return UserResult{}, err
	}
	dir, name, err := readDockerfile(opts.Dockerfile, opts.Base)
	if err != nil {
		return UserResult{}, err
	}
	base, err := cli.ImageInspect(ctx, opts.Base)
	if cerrdefs.IsNotFound(err) {
		return UserResult{}, fmt.Errorf("the sandbox image %s is not on the engine: build it first with: agentbox image build", opts.Base)
	}
	if err != nil {
		return UserResult{}, engineError(cli, fmt.Errorf("inspect sandbox image %s: %w", opts.Base, err))
	}
	start := time.Now()
	img, err := buildUserImage(ctx, cli, dir, name, ref, base.ID, opts)
	if err != nil {
		return UserResult{}, err
	}
	if err := checkResult(base, img, ref, opts.Base); err != nil {
		_, _ = cli.ImageRemove(context.WithoutCancel(ctx), ref, image.RemoveOptions{PruneChildren: true})
		return UserResult{}, fmt.Errorf("%w; removed it", err)
	}
	fmt.Fprintf(opts.Progress, "image %s built in %s (%s)\n", ref, time.Since(start).Round(100*time.Millisecond), shortHash(strings.TrimPrefix(img.ID, "sha256:")))
	return UserResult{Ref: ref, ID: img.ID, Overridden: overridden(base, img)}, nil
}

// userRef normalizes the tag to build and refuses a protected one or one
// of BaseRepo, whose images the sandbox image's own build reuses.
func userRef(ref string, protected []string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("a user image needs a tag (--tag NAME)")
	}
	n, err := imagename.Normalize(ref)
	if err != nil {
		return "", fmt.Errorf("--tag: %w", err)
	}
	for _, p := range protected {
		if pn, err := imagename.Normalize(p); err == nil && pn == n {
			return "", fmt.Errorf("--tag %s is the sandbox image's own tag: a user image would overwrite it; choose another name", ref)
		}
	}
	if strings.HasPrefix(n, BaseRepo+":") || strings.HasPrefix(n, BaseRepo+"@") {
		return "", fmt.Errorf("--tag %s: %s holds the sandbox image's Debian bases; choose another name", ref, BaseRepo)
	}
	return n, nil
}

// readDockerfile checks the Dockerfile at path and returns its directory
// and its name there.
func readDockerfile(path, base string) (dir, name string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("--dockerfile: %w", err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", "", fmt.Errorf("--dockerfile: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxDockerfile {
		return "", "", fmt.Errorf("--dockerfile %s: want a regular file of at most %d bytes", path, maxDockerfile)
	}
	src, err := io.ReadAll(io.LimitReader(f, maxDockerfile))
	if err != nil {
		return "", "", fmt.Errorf("--dockerfile: %w", err)
	}
	if err := checkDockerfile(string(src), base); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	return filepath.Dir(abs), filepath.Base(abs), nil
}

// buildUserImage sends dir as the context and runs the build, returning
// the image it tagged ref.
func buildUserImage(ctx context.Context, cli Engine, dir, dockerfile, ref, baseID string, opts UserOptions) (image.InspectResponse, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return image.InspectResponse{}, fmt.Errorf("build context: %w", err)
	}
	defer root.Close()
	entries, size, err := listContext(root, dockerfile, ".dockerignore")
	if err != nil {
		return image.InspectResponse{}, err
	}
	fmt.Fprintf(opts.Progress, "build context %s: %d entries, %s\n", dir, len(entries), units.HumanSize(float64(size)))
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := writeContext(pw, root, entries)
		pw.CloseWithError(err)
		sent <- err
	}()
	img, err := runBuild(ctx, cli, pr, ref, userBuildOptions(dockerfile, ref, baseID, opts), opts.Progress)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the build stopped reading
	if serr := <-sent; err == nil && serr != nil {
		err = serr
	}
	return img, err
}

// runBuild runs one build and returns the image it tagged ref.
func runBuild(ctx context.Context, cli Engine, buildCtx io.Reader, ref string, o build.ImageBuildOptions, progress io.Writer) (image.InspectResponse, error) {
	resp, err := cli.ImageBuild(ctx, buildCtx, o)
	if err != nil {
		return image.InspectResponse{}, engineError(cli, fmt.Errorf("build image %s: %w", ref, err))
	}
	defer resp.Body.Close()
	if _, err := decodeStream(resp.Body, progress); err != nil {
		return image.InspectResponse{}, fmt.Errorf("build image %s: %w", ref, err)
	}
	info, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return info, engineError(cli, fmt.Errorf("build image %s: %w", ref, err))
	}
	return info, nil
}

// userBuildOptions are the ImageBuild options of a user's image: the
// BASE argument set, nothing pulled, the default network.
func userBuildOptions(dockerfile, ref, baseID string, opts UserOptions) build.ImageBuildOptions {
	base := opts.Base
	return build.ImageBuildOptions{
		Tags:        []string{ref},
		Dockerfile:  dockerfile,
		Remove:      true,
		ForceRemove: true,
		NoCache:     opts.NoCache,
		BuildArgs:   map[string]*string{"BASE": &base},
		Labels:      map[string]string{LabelBase: baseID},
		Version:     build.BuilderV1,
	}
}

// checkResult refuses a built image that does not hold every layer of
// the sandbox image, in order, first, or that no sandbox could start with.
func checkResult(base, img image.InspectResponse, ref, baseRef string) error {
	b, i := base.RootFS.Layers, img.RootFS.Layers
	if len(b) == 0 || len(i) < len(b) || !slices.Equal(i[:len(b)], b) {
		return fmt.Errorf("build image %s: the result is not built on the sandbox image %s", ref, baseRef)
	}
	if img.Config == nil {
		return nil
	}
	vols := make([]string, 0, len(img.Config.Volumes))
	for v := range img.Config.Volumes {
		vols = append(vols, v)
	}
	slices.Sort(vols)
	return sandboxdocker.CheckVolumes(ref, vols)
}

// overridden names what img sets, beyond what base does, that sandboxes
// override (see the Docker driver), so the person building it knows.
func overridden(base, img image.InspectResponse) []string {
	b, c := base.Config, img.Config
	if b == nil || c == nil {
		return nil
	}
	var out []string
	note := func(changed bool, what string) {
		if changed {
			out = append(out, what)
		}
	}
	note(c.User != b.User, "USER "+c.User+": sandboxes run as a uid of their own")
	note(!slices.Equal(c.Entrypoint, b.Entrypoint) || !slices.Equal(c.Cmd, b.Cmd), "ENTRYPOINT and CMD: the agentbox guest is what sandboxes run")
	note(c.WorkingDir != b.WorkingDir, "WORKDIR "+c.WorkingDir+": sandboxes work in /workspace")
	note(len(c.Volumes) > len(b.Volumes), "VOLUME: sandboxes mount a tmpfs, bounded by their memory, in each one's place")
	note(c.Healthcheck != nil && !slices.Equal(c.Healthcheck.Test, []string{"NONE"}), "HEALTHCHECK: turned off in sandboxes")
	note(len(c.ExposedPorts) > len(b.ExposedPorts), "EXPOSE: no sandbox port is ever published")
	note(c.StopSignal != b.StopSignal, "STOPSIGNAL: sandboxes stop with SIGTERM")
	for _, kv := range c.Env {
		k, _, _ := strings.Cut(kv, "=")
		note(guest.ReadsEnv(k), "ENV "+k+": the agentbox guest runs without it (commands get it)")
	}
	return out
}

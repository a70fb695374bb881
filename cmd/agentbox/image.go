package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newImageCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and inspect the sandbox image",
		Long: `The sandbox image is what every sandbox runs, in two layers, each an image:

  core     Debian bookworm with Python (pytest, flask, requests, numpy,
           pandas), Node.js with TypeScript, git, curl and build tools:
           what a coding job needs. Tagged with "-core" added to the
           image's name (agentbox-sandbox-core:latest).
  desktop  the core and, on top, the desktop and notebook stack (Xvfb,
           openbox, xdotool, x11vnc, noVNC, websockify, Jupyter) that the
           computer and python tools use: the full image
           (agentbox-sandbox:latest).

While the full image is missing and the core is current, sandboxes that
need no desktop (exec, the shell agent) run on the core, and a server
builds the desktop layer in the background; jobs with the computer and
python tools wait for it, saying so in their log. The definition is built
into agentbox; each image is labelled with a hash of its part, so agentbox
can tell whether the image on the engine is current.`,
	}
	cmd.AddCommand(newImageBuildCmd(a), newImageInspectCmd(a))
	return cmd
}

func newImageBuildCmd(a *app) *cobra.Command {
	opts := image.Options{}
	var dockerfile string
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the sandbox image (with or without a registry), or a user's image on top of it",
		Long: `Build the sandbox image on the container engine, unless the image there is
already current (use --force to rebuild anyway).

There are two ways to get the Debian base the image starts from:

  --from registry  the engine pulls debian:bookworm-slim from its registry
                   (Docker Hub or a configured mirror).
  --from archive   no registry at all: mmdebstrap builds a minimal bookworm
                   root from the Debian archive (--mirror), which is streamed
                   into the engine's import API as agentbox-base:bookworm-<hash>.
                   Needs mmdebstrap on this host (apt-get install mmdebstrap)
                   and root or unprivileged user namespaces. The base is
                   reused by later builds.
  --from auto      archive if mmdebstrap is installed, else registry (default).

Either way the packages are then installed from the Debian archive by the
engine's builder, using the host's network.

--layer core builds the core alone (a few minutes on a new machine: what
scripts/setup.sh builds before it runs a first sandbox); --layer desktop
(the default) builds the full image, and the core first if it is not
current. See agentbox image --help for the two layers.

With --dockerfile PATH --tag NAME it builds a user's image instead, on top
of the sandbox image, for jobs that ask for it ("image": "NAME") once the
operator adds NAME to AGENTBOX_IMAGES. The Dockerfile's directory is the
build context (less what its .dockerignore excludes). Every stage starts
FROM the sandbox image, by its name or as $BASE after an ARG BASE (set to
the sandbox image), or FROM an earlier stage: nothing is pulled. RUN steps
reach the network through the engine's default bridge. Sandboxes of the
image run as they do in the sandbox image: its USER, ENTRYPOINT, CMD,
WORKDIR, HEALTHCHECK and exposed ports are overridden, its volumes become
tmpfs. The sandbox image's own tag cannot be overwritten.`,
		Example: `  agentbox image build
  agentbox image build --layer core
  agentbox image build --from archive --mirror http://ftp.de.debian.org/debian
  agentbox image build --force --tag agentbox-sandbox:test
  agentbox image build --dockerfile ml/Dockerfile --tag python-ml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dockerfile != "" || cmd.Flags().Changed("dockerfile") {
				return a.buildUserImage(cmd, dockerfile, opts)
			}
			opts.Progress = cmd.OutOrStdout()
			return wiring.BuildImage(cmd.Context(), a.cfg, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.From, "from", image.FromAuto, "where the Debian base comes from: auto, registry or archive")
	f.BoolVar(&opts.Force, "force", false, "rebuild even if the image is current, without the build cache")
	f.StringVar(&opts.Ref, "tag", "", "image to build (default: AGENTBOX_IMAGE or "+config.DefaultImage+"); with --dockerfile, the user image's name")
	f.StringVar(&opts.Mirror, "mirror", image.DefaultMirror, "Debian archive for --from archive")
	f.StringVar(&opts.Layer, "layer", image.LayerDesktop, "what to build: core (Debian, Python, Node.js, git, build tools) or desktop (the full image: the core and the desktop and notebook layer)")
	f.StringVar(&dockerfile, "dockerfile", "", "build a user's image from this Dockerfile, on top of the sandbox image (needs --tag)")
	return cmd
}

// buildUserImage is `agentbox image build --dockerfile`.
func (a *app) buildUserImage(cmd *cobra.Command, dockerfile string, opts image.Options) error {
	for _, f := range []string{"from", "mirror", "layer"} {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("--%s is for the sandbox image, not with --dockerfile", f)
		}
	}
	if dockerfile == "" || opts.Ref == "" {
		return fmt.Errorf("--dockerfile PATH needs --tag NAME, the name jobs will ask for")
	}
	return wiring.BuildUserImage(cmd.Context(), a.cfg, image.UserOptions{Dockerfile: dockerfile, Ref: opts.Ref, NoCache: opts.Force, Progress: cmd.OutOrStdout()})
}

func newImageInspectCmd(a *app) *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:     "inspect",
		Aliases: []string{"status"},
		Short:   "Say whether the sandbox image and its core are present and current",
		Long: `Report whether the sandbox image (the full image, with the desktop and
notebook layer) and its core are on the engine and built from this
agentbox's image definition (their io.agentbox.image.hash labels).
Exits 1 when the full image is missing or out of date.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := wiring.InspectLayers(cmd.Context(), a.cfg, ref)
			if err != nil {
				return err
			}
			image.WriteStatus(cmd.OutOrStdout(), ls)
			if !ls.Full.Current {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "tag", "", "image to inspect (default: AGENTBOX_IMAGE or "+config.DefaultImage+")")
	return cmd
}

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newImageCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and inspect the sandbox image",
		Long: `The sandbox image is what every sandbox runs: Debian bookworm with Python
(pytest, flask, requests, numpy, pandas), Node.js with TypeScript, git, curl,
build tools, and the desktop and notebook stack (Xvfb, openbox, xdotool,
x11vnc, noVNC, websockify, Jupyter). Its definition is built into agentbox;
the image is labelled with a hash of it, so agentbox can tell whether the
image on the engine is current.`,
	}
	cmd.AddCommand(newImageBuildCmd(a), newImageInspectCmd(a))
	return cmd
}

func newImageBuildCmd(a *app) *cobra.Command {
	opts := image.Options{}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the sandbox image (with or without a registry)",
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
engine's builder, using the host's network.`,
		Example: `  agentbox image build
  agentbox image build --from archive --mirror http://ftp.de.debian.org/debian
  agentbox image build --force --tag agentbox-sandbox:test`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Progress = cmd.OutOrStdout()
			res, err := wiring.BuildImage(cmd.Context(), a.cfg, opts)
			if err != nil {
				return err
			}
			if res.Built {
				fmt.Fprintf(cmd.OutOrStdout(), "built %s %s\n", res.Ref, res.ID)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.From, "from", image.FromAuto, "where the Debian base comes from: auto, registry or archive")
	f.BoolVar(&opts.Force, "force", false, "rebuild even if the image is current, without the build cache")
	f.StringVar(&opts.Ref, "tag", "", "image to build (default: AGENTBOX_IMAGE or "+config.DefaultImage+")")
	f.StringVar(&opts.Mirror, "mirror", image.DefaultMirror, "Debian archive for --from archive")
	return cmd
}

func newImageInspectCmd(a *app) *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:     "inspect",
		Aliases: []string{"status"},
		Short:   "Say whether the sandbox image is present and current",
		Long: `Report whether the sandbox image is on the engine and whether it was built
from this agentbox's image definition (its io.agentbox.image.hash label).
Exits 1 when the image is missing or out of date.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ref, st, err := wiring.InspectImage(cmd.Context(), a.cfg, ref)
			if err != nil {
				return err
			}
			printStatus(cmd.OutOrStdout(), ref, st)
			if !st.Current {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "tag", "", "image to inspect (default: AGENTBOX_IMAGE or "+config.DefaultImage+")")
	return cmd
}

func printStatus(w io.Writer, ref string, st image.Status) {
	fmt.Fprintf(w, "image:   %s\n", ref)
	fmt.Fprintf(w, "present: %t\n", st.Present)
	fmt.Fprintf(w, "current: %t\n", st.Current)
	if st.Present {
		fmt.Fprintf(w, "id:      %s\n", st.ID)
		fmt.Fprintf(w, "hash:    %s\n", orNone(st.Hash))
	}
	fmt.Fprintf(w, "want:    %s\n", sandboximage.Hash())
	if !st.Current {
		fmt.Fprintln(w, "fix:     agentbox image build")
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

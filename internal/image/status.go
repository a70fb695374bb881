package image

import (
	"fmt"
	"io"
	"slices"
	"strings"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
)

// WriteStatus writes what `agentbox image inspect` says of ls: the full
// image, its core and the desktop layer, and the command that fixes them.
func WriteStatus(w io.Writer, ls Layers) {
	fmt.Fprintf(w, "image:   %s\n", ls.FullRef)
	fmt.Fprintf(w, "present: %t\n", ls.Full.Present)
	fmt.Fprintf(w, "current: %t\n", ls.Full.Current)
	if ls.Full.Present {
		fmt.Fprintf(w, "id:      %s\n", ls.Full.ID)
		fmt.Fprintf(w, "hash:    %s\n", orNone(ls.Full.Hash))
	}
	fmt.Fprintf(w, "want:    %s\n", sandboximage.Hash())
	fmt.Fprintf(w, "core:    %s %s\n", ls.CoreRef, layerState(ls.Core))
	fmt.Fprintf(w, "desktop: %s\n", desktopState(ls))
	switch {
	case ls.Full.Current:
	case ls.Core.Current:
		fmt.Fprintln(w, "fix:     agentbox image build   (builds the desktop layer; a server builds it by itself when the full image is missing)")
	default:
		fmt.Fprintln(w, "fix:     agentbox image build")
	}
}

func layerState(st Status) string {
	switch {
	case st.Current:
		return "ready"
	case st.Present:
		return "out of date"
	}
	return "missing"
}

// desktopState says whether the desktop and notebook layer is ready, and
// what sandboxes do meanwhile.
func desktopState(ls Layers) string {
	switch {
	case ls.Full.Current:
		return "ready"
	case ls.Full.Present:
		return "out of date (sandboxes use it until it is rebuilt)"
	case ls.Core.Current:
		return "missing: sandboxes run on the core; jobs with the computer and python tools wait while a server builds it"
	}
	return "missing"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteUserResult writes what `agentbox image build --dockerfile` says of
// the image it built: its id, what sandboxes override of it, and whether
// jobs may use it (allowed: the images AGENTBOX_IMAGES lets jobs ask for,
// listed: the names it lists).
func WriteUserResult(w io.Writer, res UserResult, allowed, listed []string) {
	fmt.Fprintf(w, "built %s %s\n", res.Ref, res.ID)
	if len(res.Overridden) > 0 {
		fmt.Fprintln(w, "sandboxes of it override what it sets:")
		for _, o := range res.Overridden {
			fmt.Fprintf(w, "  %s\n", o)
		}
	}
	if slices.Contains(allowed, res.Ref) {
		fmt.Fprintf(w, "%s is in AGENTBOX_IMAGES: jobs may ask for it (\"image\": %q, --image %s)\n", res.Ref, res.Ref, res.Ref)
		return
	}
	fmt.Fprintf(w, "jobs may not use it yet: add %s to AGENTBOX_IMAGES (comma-separated) where agentbox serves, e.g.\n  AGENTBOX_IMAGES=%s\n",
		res.Ref, strings.Join(slices.Concat(listed, []string{res.Ref}), ","))
}

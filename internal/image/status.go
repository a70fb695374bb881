package image

import (
	"fmt"
	"io"

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

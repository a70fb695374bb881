package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// Isolation kinds: the boundary between a sandbox and its host.
const (
	IsolationContainer = "container" // namespaces, cgroups and seccomp under runc
	IsolationGVisor    = "gvisor"    // a user-space kernel (runsc)
	IsolationMicroVM   = "microvm"   // a virtual machine of its own
)

// Isolations lists every isolation tier, weakest first.
var Isolations = []string{IsolationContainer, IsolationGVisor, IsolationMicroVM}

// CheckIsolation refuses, with ErrIsolationUnavailable, a name that is no
// isolation tier ("" is the default).
func CheckIsolation(name string) error {
	if name == "" || slices.Contains(Isolations, name) {
		return nil
	}
	// %.64q: the name is a client's, of any length; 64 runes of it say enough.
	return fmt.Errorf("%w: isolation %.64q: use %s", ErrIsolationUnavailable, name, strings.Join(Isolations, ", "))
}

// Guest transports: how the host reaches a sandbox's guest.
const (
	TransportUnix  = "unix"  // a unix socket in a host directory
	TransportTCP   = "tcp"   // TCP, every request carrying the sandbox's secret
	TransportVsock = "vsock" // a vsock port of a virtual machine
	// TransportSerial is a virtual machine's virtio-serial port, its
	// connections multiplexed (where no vsock device can be given).
	TransportSerial = "serial"
)

// Capabilities says what a driver's sandboxes offer, so callers can check
// a request before they make one.
type Capabilities struct {
	// Isolation is the kind of boundary around each sandbox
	// (IsolationContainer, ...).
	Isolation string
	// Desktop says whether sandboxes can run the desktop and Jupyter.
	Desktop bool
	// Networks are the network modes a Spec may name; the first is the
	// default ("none").
	Networks []string
	// NamedNetworks says whether a Spec may also name a network made in the
	// engine by its operator.
	NamedNetworks bool
	// Pause says whether a sandbox can be frozen and thawed.
	Pause bool
	// Snapshot says whether a sandbox's state can be saved and restored.
	Snapshot bool
	// Transport is how the host reaches the guest (TransportUnix, ...).
	Transport string
	// Bind says whether a sandbox can be created unbound (Spec.Binding
	// nil) and bound to its job later (Binder), as a warm pool needs.
	Bind bool
}

// CheckNetwork refuses, with ErrInvalidSpec, a network mode a Spec may not
// ask for ("" is the default). A mode that shares a namespace with the host
// or another container ("host", "container:ID", "ns:PATH") is never
// allowed.
func (c Capabilities) CheckNetwork(mode string) error {
	switch {
	case mode == "" || slices.Contains(c.Networks, mode):
		return nil
	case c.NamedNetworks && mode != "host" && !strings.Contains(mode, ":"):
		return nil
	}
	allowed := strings.Join(c.Networks, ", ")
	if c.NamedNetworks {
		allowed += " or a named network"
	}
	return fmt.Errorf("%w: sandbox network %q: use %s (host and container: are refused)", ErrInvalidSpec, mode, allowed)
}

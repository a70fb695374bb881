// Package drivers chooses a sandbox driver by name (AGENTBOX_DRIVER,
// --driver): it is the one place that knows every implementation of
// sandbox.Driver, so that nothing else imports them to build one.
package drivers

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
)

// Default is the driver used when none is named.
const Default = docker.DriverName

// ErrUnknown means no driver has the name asked for.
var ErrUnknown = errors.New("unknown sandbox driver")

// Options configures the drivers Open may build; each reads its own part.
type Options struct {
	// Isolation is the tier of a sandbox whose spec names none
	// (AGENTBOX_ISOLATION; "" for container).
	Isolation string
	// Docker configures the container and gvisor tiers.
	Docker docker.Config
	// MicroVM configures the microvm tier, a driver of its own.
	MicroVM microvm.DriverConfig
}

// opener builds one driver.
type opener func(Options) (sandbox.Driver, error)

var openers = map[string]opener{
	// Docker runs the container and gvisor tiers (runc and runsc).
	docker.DriverName: func(o Options) (sandbox.Driver, error) {
		t, err := OpenTiers(o.Isolation, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	},
}

// Names lists the known drivers, sorted.
func Names() []string { return slices.Sorted(maps.Keys(openers)) }

// Open builds the driver called name ("" for Default) from o. An unknown
// name fails with ErrUnknown, listing the known ones.
func Open(name string, o Options) (sandbox.Driver, error) {
	if name == "" {
		name = Default
	}
	open, ok := openers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: known drivers are %s", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	d, err := open(o)
	if err != nil {
		return nil, fmt.Errorf("%s driver: %w", name, err)
	}
	return d, nil
}

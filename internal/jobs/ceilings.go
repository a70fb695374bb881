package jobs

import (
	"fmt"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
)

// CheckCeilings refuses limits over the operator's ceilings, naming each
// limit, what was asked and its ceiling.
func CheckCeilings(l store.Limits, c config.Ceilings) error {
	var over Problems
	check := func(name string, v, ceiling int64, text func(int64) string, env string) {
		if v > ceiling {
			over.Add("limits."+name, fmt.Sprintf("limits.%s %s is over its ceiling %s (%s)", name, text(v), text(ceiling), env))
		}
	}
	count := func(n int64) string { return strconv.FormatInt(n, 10) }
	check("memory", l.MemoryBytes, c.MemoryBytes, units.FormatSize, "AGENTBOX_CEILING_MEMORY")
	check("cpus", l.NanoCPUs, c.NanoCPUs, units.FormatCPUs, "AGENTBOX_CEILING_CPUS")
	check("disk", l.DiskBytes, c.DiskBytes, units.FormatSize, "AGENTBOX_CEILING_DISK")
	check("timeout", int64(l.Timeout), int64(c.Timeout), func(n int64) string { return durationText(time.Duration(n)) }, "AGENTBOX_CEILING_TIMEOUT")
	check("max_steps", int64(l.MaxSteps), int64(c.MaxSteps), count, "AGENTBOX_CEILING_STEPS")
	return over.Err(ErrOverCeiling)
}

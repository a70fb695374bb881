package guest

import (
	"slices"
	"strings"
)

// runtimeEnv are the Go runtime's variables, which the guest's runtime
// reads before any of its code runs.
var runtimeEnv = []string{"GODEBUG", "GOGC", "GOMAXPROCS", "GOMEMLIMIT", "GOTRACEBACK"}

// ReadsEnv reports whether the guest reads the environment variable key:
// the Go runtime's and agentbox's own (AGENTBOX_*, such as the guest's
// secret). An image's value for one does not reach the guest; every
// driver blanks it (container) or keeps it from the guest (microvm).
func ReadsEnv(key string) bool {
	return slices.Contains(runtimeEnv, key) || strings.HasPrefix(key, "AGENTBOX_")
}

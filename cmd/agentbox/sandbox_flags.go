package main

import (
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wiring"
)

// addSandboxFlags adds the flags of the sandbox a local command makes
// for the agent (run, chat): --memory, --cpus, --disk, --isolation and
// --image. One function, so that the commands take them alike.
func addSandboxFlags(fl *pflag.FlagSet, r *wiring.SandboxRequest) {
	fl.Var(sizeVar(&r.Memory), "memory", "sandbox memory limit, e.g. 2g")
	fl.Var(cpusVar(&r.CPUs), "cpus", "sandbox CPU limit, e.g. 1.5")
	fl.Var(sizeVar(&r.Disk), "disk", "sandbox disk quota, workspace included, e.g. 2g (default "+config.Lookup("AGENTBOX_SANDBOX_DISK").Fallback()+")")
	fl.StringVar(&r.Isolation, "isolation", "", isolationUsage)
	fl.StringVar(&r.Image, "image", "", "sandbox image, one AGENTBOX_IMAGES lists (default AGENTBOX_IMAGE, else "+config.DefaultImage+")")
}

// addProjectFlags adds --workspace and --in-place, the directory of the
// person's a local command works on (run, chat; workspace.ProjectDir).
func addProjectFlags(fl *pflag.FlagSet, dir *string, inPlace *bool) {
	fl.StringVar(dir, "workspace", "", "start from a copy of this directory's files (DIR is not modified)")
	fl.BoolVar(inPlace, "in-place", false, "with --workspace: work in DIR itself, changing it (needs root)")
}

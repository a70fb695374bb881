package doctor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/wiring"
)

// limitChecks report what bounds the sandboxes together: the host's file
// table, its free disk and how quotas are enforced, and the sandboxes' uids.
func (d doctor) limitChecks(ctx context.Context) []Check {
	return []Check{d.filesCheck(), d.diskCheck(), d.uidCheck(), d.usernsCheck(ctx)}
}

// filesCheck shows the margin between what the sandboxes could open at
// once and the host's fs.file-max.
func (d doctor) filesCheck() Check {
	fileMax, err := config.HostFileMax()
	if err != nil {
		return Check{"open files", Warn, err.Error(), ""}
	}
	return d.filesCheckOf(fileMax)
}

// filesCheckOf is filesCheck on a host whose fs.file-max is fileMax.
func (d doctor) filesCheckOf(fileMax int64) Check {
	sb, conc := d.cfg.Sandbox, max(d.cfg.Server.Concurrency, 1)
	nofile, err := config.FitFiles(fileMax, conc, sb.PidsLimit, sb.NoFile)
	if err != nil {
		return Check{"open files", Fail, err.Error(), "lower AGENTBOX_CONCURRENCY or AGENTBOX_SANDBOX_PIDS, or raise fs.file-max (sysctl -w fs.file-max=...)"}
	}
	need := config.FileBudget(conc, sb.PidsLimit, nofile)
	detail := fmt.Sprintf("%d sandboxes × %d processes × %d open files = %d", conc, sb.PidsLimit, nofile, need)
	if fileMax >= config.FileMaxUnlimited {
		return Check{"open files", OK, detail + "; fs.file-max is unlimited (the kernel's default: memory bounds the file table)", ""}
	}
	detail += fmt.Sprintf(", %s of fs.file-max %d (margin %d)", percent(need, fileMax), fileMax, fileMax-need)
	if table := config.FileTableNeed(conc, sb.Ceilings.MemoryBytes); fileMax < table {
		return Check{"open files", Warn, detail + fmt.Sprintf("; but files mapped and closed are bounded by memory only: %d sandboxes at the %s memory ceiling need fs.file-max %d (agentbox raises it when started as root)",
			conc, units.FormatSize(sb.Ceilings.MemoryBytes), table), fmt.Sprintf("sudo sysctl -w fs.file-max=%d   (scripts/setup.sh makes it permanent)", table)}
	}
	if nofile < sb.NoFile {
		return Check{"open files", Warn, detail + fmt.Sprintf("; lowered from AGENTBOX_SANDBOX_NOFILE=%d to fit", sb.NoFile), "raise fs.file-max, or lower AGENTBOX_CONCURRENCY or AGENTBOX_SANDBOX_PIDS"}
	}
	return Check{"open files", OK, detail, ""}
}

// percent is part of whole as a percentage a person reads: "<1%" rather
// than "0%" for a part that is not nothing.
func percent(part, whole int64) string {
	p := 100 * float64(part) / float64(whole)
	if p > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

// diskCheck shows the free space against the floor, and how the disk
// quota is enforced on the data dir's filesystem.
func (d doctor) diskCheck() Check {
	dir := d.cfg.DataDir
	free, err := diskusage.FreeOf(dir)
	if err != nil {
		return Check{"disk", Warn, err.Error(), ""}
	}
	mode := docker.QuotaWatch
	if drv, err := wiring.NewDriver(d.cfg, d.log, 1); err == nil {
		if q, ok := drv.(sandbox.QuotaModer); ok {
			mode = q.QuotaMode(dir)
		}
		drv.Close()
	}
	sb := d.cfg.Sandbox
	floor := diskusage.Floor{Bytes: sb.MinFreeDisk, Inodes: sb.MinFreeInodes}
	detail := fmt.Sprintf("%s free under %s (floor %s), %s; quota %s and %d inodes per sandbox, enforced by %s",
		units.FormatSize(free.Bytes), dir, units.FormatSize(floor.Bytes), inodesText(free.Inodes, floor.Inodes),
		units.FormatSize(sb.DiskBytes), sandbox.InodeLimit(sb.DiskBytes), mode)
	if why, err := floor.Below(dir); err == nil && why != "" {
		return Check{"disk", Fail, detail + ": no sandbox starts below the floor", "free space or inodes, lower AGENTBOX_MIN_FREE_DISK or AGENTBOX_MIN_FREE_INODES, or shorten AGENTBOX_RETENTION"}
	}
	if mode == docker.QuotaWatch {
		return Check{"disk", Warn, detail + ": no kernel quota (needs root, and loop devices or XFS project quotas)", "run agentbox as root on a host with loop devices, or see docs/security.md#disk-quota"}
	}
	return Check{"disk", OK, detail, ""}
}

// inodesText says the free inodes against their floor.
func inodesText(free, floor int64) string {
	if free < 0 {
		return "inodes not counted by this filesystem"
	}
	return fmt.Sprintf("%d inodes free (floor %d)", free, floor)
}

// uidCheck makes sure no host account has a uid of the sandboxes' range.
func (d doctor) uidCheck() Check {
	r := d.cfg.Sandbox.UIDs
	users, err := accountsIn("/etc/passwd", r)
	if err != nil {
		return Check{"sandbox uids", Warn, err.Error(), ""}
	}
	if len(users) > 0 {
		return Check{"sandbox uids", Fail, "host accounts use uids of " + r.String() + ": " + strings.Join(users, ", "), "choose another range: export AGENTBOX_SANDBOX_UIDS=FIRST-LAST"}
	}
	return Check{"sandbox uids", OK, r.String() + ", one per sandbox, none a host account's", ""}
}

// accountsIn lists the accounts of a passwd file whose uid is in r.
func accountsIn(passwd string, r config.UIDRange) ([]string, error) {
	f, err := os.Open(passwd)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if uid, err := strconv.Atoi(fields[2]); err == nil && uid >= r.First && uid <= r.Last {
			out = append(out, fmt.Sprintf("%s (%d)", fields[0], uid))
		}
	}
	return out, sc.Err()
}

// usernsCheck says whether the engine remaps container uids into a
// subordinate range (dockerd --userns-remap).
func (d doctor) usernsCheck(ctx context.Context) Check {
	cli, err := wiring.DockerClient(d.cfg.Docker)
	if err != nil {
		return Check{"userns remap", Warn, err.Error(), ""}
	}
	defer cli.Close()
	info, err := cli.Info(ctx)
	if err != nil {
		return Check{"userns remap", Warn, "cannot ask the engine: " + err.Error(), ""}
	}
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "name=userns") {
			return Check{"userns remap", OK, "on: sandbox uids are remapped into a subordinate range (" + filepath.Base(info.DockerRootDir) + ")", ""}
		}
	}
	return Check{"userns remap", Warn, "off: sandboxes run as host uids " + d.cfg.Sandbox.UIDs.String() + " (no host account's); remapping adds a second layer",
		"see docs/security.md#user-namespaces (dockerd --userns-remap=default)"}
}

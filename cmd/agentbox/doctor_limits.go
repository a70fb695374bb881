package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/wiring"
)

// limitChecks report what bounds the sandboxes together: the host's file
// table, its free disk and how quotas are enforced, and the sandboxes' uids.
func (a *app) limitChecks(ctx context.Context) []check {
	return []check{a.filesCheck(), a.diskCheck(), a.uidCheck(), a.usernsCheck(ctx)}
}

// filesCheck shows the margin between what the sandboxes could open at
// once and the host's fs.file-max.
func (a *app) filesCheck() check {
	sb, conc := a.cfg.Sandbox, max(a.cfg.Server.Concurrency, 1)
	fileMax, err := config.HostFileMax()
	if err != nil {
		return check{"open files", "warn", err.Error(), ""}
	}
	nofile, err := config.FitFiles(fileMax, conc, sb.PidsLimit, sb.NoFile)
	if err != nil {
		return check{"open files", "fail", err.Error(), "lower AGENTBOX_CONCURRENCY or AGENTBOX_SANDBOX_PIDS, or raise fs.file-max (sysctl -w fs.file-max=...)"}
	}
	need := config.FileBudget(conc, sb.PidsLimit, nofile)
	detail := fmt.Sprintf("%d sandboxes × %d processes × %d open files = %d, %.0f%% of fs.file-max %d (margin %d)",
		conc, sb.PidsLimit, nofile, need, 100*float64(need)/float64(fileMax), fileMax, fileMax-need)
	if table := config.FileTableNeed(conc, sb.Ceilings.MemoryBytes); fileMax < table {
		return check{"open files", "warn", detail + fmt.Sprintf("; but files mapped and closed are bounded by memory only: %d sandboxes at the %s memory ceiling need fs.file-max %d (agentbox raises it when started as root)",
			conc, config.SizeText(sb.Ceilings.MemoryBytes), table), fmt.Sprintf("sudo sysctl -w fs.file-max=%d   (scripts/setup.sh makes it permanent)", table)}
	}
	if nofile < sb.NoFile {
		return check{"open files", "warn", detail + fmt.Sprintf("; lowered from AGENTBOX_SANDBOX_NOFILE=%d to fit", sb.NoFile), "raise fs.file-max, or lower AGENTBOX_CONCURRENCY or AGENTBOX_SANDBOX_PIDS"}
	}
	return check{"open files", "ok", detail, ""}
}

// diskCheck shows the free space against the floor, and how the disk
// quota is enforced on the data dir's filesystem.
func (a *app) diskCheck() check {
	dir := a.cfg.DataDir
	free, err := docker.DiskFree(dir)
	if err != nil {
		return check{"disk", "warn", err.Error(), ""}
	}
	mode := docker.QuotaWatch
	if d, err := wiring.NewDriver(a.cfg, a.log, 1); err == nil {
		if q, ok := d.(interface{ QuotaMode(dir string) string }); ok {
			mode = q.QuotaMode(dir)
		}
		d.Close()
	}
	floor := a.cfg.Sandbox.MinFreeDisk
	detail := fmt.Sprintf("%s free under %s (floor %s); quota %s per sandbox, enforced by %s",
		config.SizeText(free), dir, config.SizeText(floor), config.SizeText(a.cfg.Sandbox.DiskBytes), mode)
	if free < floor {
		return check{"disk", "fail", detail + ": no sandbox starts below the floor", "free space, lower AGENTBOX_MIN_FREE_DISK, or shorten AGENTBOX_RETENTION"}
	}
	if mode == docker.QuotaWatch {
		return check{"disk", "warn", detail + ": no kernel quota (needs root, and loop devices or XFS project quotas)", "run agentbox as root on a host with loop devices, or see docs/security.md#disk-quota"}
	}
	return check{"disk", "ok", detail, ""}
}

// uidCheck makes sure no host account has a uid of the sandboxes' range.
func (a *app) uidCheck() check {
	r := a.cfg.Sandbox.UIDs
	users, err := accountsIn("/etc/passwd", r)
	if err != nil {
		return check{"sandbox uids", "warn", err.Error(), ""}
	}
	if len(users) > 0 {
		return check{"sandbox uids", "fail", "host accounts use uids of " + r.String() + ": " + strings.Join(users, ", "), "choose another range: export AGENTBOX_SANDBOX_UIDS=FIRST-LAST"}
	}
	return check{"sandbox uids", "ok", r.String() + ", one per sandbox, none a host account's", ""}
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
func (a *app) usernsCheck(ctx context.Context) check {
	cli, err := wiring.DockerClient(a.cfg.Docker)
	if err != nil {
		return check{"userns remap", "warn", err.Error(), ""}
	}
	defer cli.Close()
	info, err := cli.Info(ctx)
	if err != nil {
		return check{"userns remap", "warn", "cannot ask the engine: " + err.Error(), ""}
	}
	for _, o := range info.SecurityOptions {
		if strings.Contains(o, "name=userns") {
			return check{"userns remap", "ok", "on: sandbox uids are remapped into a subordinate range (" + filepath.Base(info.DockerRootDir) + ")", ""}
		}
	}
	return check{"userns remap", "warn", "off: sandboxes run as host uids " + a.cfg.Sandbox.UIDs.String() + " (no host account's); remapping adds a second layer",
		"see docs/security.md#user-namespaces (dockerd --userns-remap=default)"}
}

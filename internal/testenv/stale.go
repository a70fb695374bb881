package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"golang.org/x/sys/unix"
)

// staleAfter is how old a test's sandbox or loop disk must be to be taken
// for the leftover of a killed run: older than any test package runs.
const staleAfter = 30 * time.Minute

// testInstances are the instance label prefixes test sandboxes carry.
var testInstances = []string{"test-", "clitest-", "toolstest-", "jobtest-", "servetest-"}

// ReapStale removes what test runs killed half-way left behind: their
// sandboxes (containers of a test instance older than staleAfter), the
// loop disks mounted for them under the temp dir, and the tmux servers
// of terminal tests whose process is gone. Best effort and quiet:
// without an engine there is nothing to reap.
func ReapStale() {
	reapTmux()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DockerClient()
	if err != nil {
		return
	}
	defer c.Close()
	cs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "io.agentbox.managed=true"))})
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, ct := range cs {
		if isTestInstance(ct.Labels["io.agentbox.instance"]) && time.Since(time.Unix(ct.Created, 0)) > staleAfter {
			_ = c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true})
			continue
		}
		live[ct.Labels["io.agentbox.state-dir"]] = true
	}
	unmountStaleDisks(live)
}

func isTestInstance(instance string) bool {
	for _, p := range testInstances {
		if strings.HasPrefix(instance, p) {
			return true
		}
	}
	return false
}

// unmountStaleDisks unmounts the loop disks under the temp dir whose
// sandbox no longer exists (its state dir is no live container's).
func unmountStaleDisks(live map[string]bool) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	tmp := filepath.Clean(os.TempDir()) + "/"
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], tmp) || filepath.Base(f[1]) != "disk" {
			continue
		}
		state := filepath.Dir(f[1])
		if live[state] {
			continue
		}
		// A disk whose image is gone is a removed test's (its data dir was
		// deleted around the mount); one whose image stays, stale once old.
		fi, err := os.Stat(filepath.Join(state, "disk.img"))
		if err == nil && time.Since(fi.ModTime()) < staleAfter || err != nil && !os.IsNotExist(err) {
			continue
		}
		_ = unix.Unmount(f[1], unix.MNT_DETACH)
	}
}

// UnmountUnder unmounts the sandboxes' loop disks mounted under dir: what
// a test's server killed with -9 leaves once its containers are removed,
// which would keep the test's data dir and a loop device.
func UnmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	prefix := filepath.Clean(dir) + "/"
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[1], prefix) && filepath.Base(f[1]) == "disk" {
			_ = unix.Unmount(f[1], unix.MNT_DETACH)
		}
	}
}

package docker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox/hostuid"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Each sandbox runs as a uid of its own from Config.UIDs, which no host
// account uses: the files it leaves and the processes it runs are its
// own, and a uid never names a person. The image's /etc/passwd and
// /etc/group are replaced by files naming that uid "agent", so tools that
// look the user up (git, ssh, Python's getpass) keep working.

// allocUID picks a uid of the range that no running sandbox of this engine
// uses, whatever agentbox installation made it.
func (d *Driver) allocUID(ctx context.Context) (int, error) {
	r := d.cfg.UIDs
	n := r.Last - r.First + 1
	for range 32 {
		uid := r.First + rand.IntN(n)
		d.mu.Lock()
		taken := d.uids[uid]
		if !taken {
			d.uids[uid] = true
		}
		d.mu.Unlock()
		if taken {
			continue
		}
		used, err := d.uidRunning(ctx, uid)
		if err == nil && !used {
			return uid, nil
		}
		d.freeUID(uid)
		if err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("no free sandbox uid in %d-%d after 32 tries; widen AGENTBOX_SANDBOX_UIDS", r.First, r.Last)
}

// uidRunning reports whether a sandbox of this engine has uid, or a
// process of this host runs as it (a microVM's QEMU takes its uid from the
// same range).
func (d *Driver) uidRunning(ctx context.Context, uid int) (bool, error) {
	f := filters.NewArgs(filters.Arg("label", LabelUID+"="+strconv.Itoa(uid)))
	cs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return false, fmt.Errorf("list sandboxes: %w", engineErr(err))
	}
	if len(cs) > 0 {
		return true, nil
	}
	return hostuid.InUse(uid)
}

func (d *Driver) freeUID(uid int) {
	d.mu.Lock()
	delete(d.uids, uid)
	d.mu.Unlock()
}

// writeAccounts writes the passwd and group files the sandbox sees, into
// its host-private state dir (mounted read-only).
func writeAccounts(stateDir string, uid int) error {
	passwd, group := guest.Accounts(uid)
	files := map[string]string{"passwd": passwd, "group": group}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(stateDir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("sandbox accounts: %w", err)
		}
	}
	return nil
}

// owner is a uid and gid of the host.
type owner struct{ uid, gid int }

// ownerOf is who owns path.
func ownerOf(path string) (owner, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return owner{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return owner{int(st.Uid), int(st.Gid)}, nil
}

// chownTree gives dir and everything under it to o (loopdisk.ChownTree).
func chownTree(dir string, o owner) error {
	return loopdisk.ChownTree(dir, o.uid, o.gid)
}

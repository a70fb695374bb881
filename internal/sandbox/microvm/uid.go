package microvm

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Each VM's QEMU runs as a host uid of its own, from DriverConfig.UIDs
// (the sandbox uid range): a QEMU that a guest took over holds no
// privilege, and cannot signal or trace another VM's QEMU or a
// container sandbox's processes, which run as other uids.

// uidsTaken are the uids of the VMs this process is starting or runs.
var uidsTaken sync.Map // int -> struct{}

// allocUID picks a uid of the range that no process on the host runs as
// (a container sandbox's, another agentbox's VM) and no VM this process
// starts or runs holds. release gives it back.
func (d *Driver) allocUID() (uid int, err error) {
	r := d.cfg.UIDs
	for range 32 {
		uid := r.First + rand.IntN(r.Last-r.First+1)
		if _, taken := uidsTaken.LoadOrStore(uid, struct{}{}); taken {
			continue
		}
		if used, err := uidInUse(uid); err != nil || used {
			uidsTaken.Delete(uid)
			if err != nil {
				return 0, err
			}
			continue
		}
		return uid, nil
	}
	return 0, fmt.Errorf("no free VM uid in %d-%d after 32 tries; widen AGENTBOX_SANDBOX_UIDS", r.First, r.Last)
}

// releaseUID gives uid back once its VM is gone.
func releaseUID(uid int) {
	if uid != 0 {
		uidsTaken.Delete(uid)
	}
}

// uidInUse reports whether a process on the host runs as uid (real,
// effective, saved or file-system uid).
func uidInUse(uid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("VM uid: %w", err)
	}
	want := strconv.Itoa(uid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		used := statusHasUID(f, want)
		f.Close()
		if used {
			return true, nil
		}
	}
	return false, nil
}

// statusHasUID reads a /proc/PID/status for its Uid line naming uid.
func statusHasUID(f *os.File, uid string) bool {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			for _, u := range strings.Fields(rest) {
				if u == uid {
					return true
				}
			}
			return false
		}
	}
	return false
}

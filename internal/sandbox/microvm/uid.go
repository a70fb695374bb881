package microvm

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/agentbox/agentbox/internal/sandbox/hostuid"
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
		if used, err := hostuid.InUse(uid); err != nil || used {
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

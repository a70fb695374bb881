package microvm

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// A directory a caller brought (agentbox exec --workspace) is shared as it
// is, not copied onto a loop disk: its quota is a watchdog, as on the
// container tier without root. It measures the directory every
// watchInterval, or twenty times as long as the last measurement took
// (diskusage.Pacer: at most 5% of a CPU), and kills the VM once the directory holds
// more than its quota. The VM can pass the quota by what it writes
// between two measurements; unlike the container tier's, no
// RLIMIT_FSIZE bounds one file inside the VM.
const watchInterval = 100 * time.Millisecond

// QuotaMode says how the quota of a job's sandbox (whose workspace is in
// dir) is enforced: by a loop disk. A directory a caller brought that is
// not a job's gets the watchdog.
func (d *Driver) QuotaMode(string) string { return loopdisk.Mode }

// watch starts the disk watchdog of a sandbox whose workspace is a
// caller's own directory; one on a loop disk needs none.
func (r *running) watch() {
	if r.st.DiskBytes <= 0 || loopdisk.Has(r.st.StateDir) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.watchDisk(ctx)
	}()
	r.unwatch = func() {
		cancel()
		<-done
	}
}

// watchDisk measures the workspace until ctx ends or the VM exits, and
// kills the VM once the workspace holds more than its quota.
func (r *running) watchDisk(ctx context.Context) {
	pace := diskusage.Pacer{MinInterval: watchInterval}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.vm.Exited():
			return
		case <-time.After(watchInterval):
		}
		if !pace.Due(time.Now()) {
			continue
		}
		begin := time.Now()
		used := diskusage.Measure(r.st.WorkspaceDir)
		pace.Measured(begin)
		if why := diskusage.OverQuota(used, r.st.DiskBytes); why != nil {
			r.stopped.CompareAndSwap(nil, &why)
			r.vm.kill()
			return
		}
	}
}

package microvm

import (
	"os/exec"
	"runtime"
)

// startPinned starts cmd, whose parent-death signal (Pdeathsig) must fire
// only when this process dies, and calls exited with how it ended.
//
// The kernel sends the parent-death signal when the *thread* that forked
// the child exits, not the process. Go ends a thread when a goroutine
// locked to it returns without unlocking, which agentbox does on purpose
// elsewhere (a dial into a sandbox's network namespace leaves its thread
// behind): a QEMU forked from a thread that such a goroutine later ran on
// would be killed mid-job. So cmd is started, and waited for, from a
// goroutine locked to its own thread for the child's whole life: no other
// goroutine runs on that thread, so none can take it down.
func startPinned(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

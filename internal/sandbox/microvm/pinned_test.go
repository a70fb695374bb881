package microvm

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPinnedChildOutlivesCallersThread: a child started with a
// parent-death signal from a goroutine whose thread then ends (a
// goroutine returning while locked to its thread, as a dial into a
// sandbox's network namespace does) lives on under startPinned, and is
// killed under a plain Start: the kernel's parent is the thread.
func TestPinnedChildOutlivesCallersThread(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pinned bool
	}{{"plain Start", false}, {"startPinned", true}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			exited := make(chan struct{})
			started := make(chan error, 1)
			var start func()
			start = func() {
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
				if unix.Gettid() == unix.Getpid() {
					// Go never ends the main thread (it parks it): try on another.
					runtime.UnlockOSThread()
					go start()
					return
				}
				if tt.pinned {
					started <- startPinned(cmd, func(error) { close(exited) })
					return
				}
				err := cmd.Start()
				if err == nil {
					go func() { cmd.Wait(); close(exited) }()
				}
				started <- err
			}
			go start()
			if err := <-started; err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			select {
			case <-exited:
				if tt.pinned {
					t.Fatalf("the child died with the thread of the goroutine that started it: %v", cmd.ProcessState)
				}
			case <-time.After(time.Second):
				if !tt.pinned {
					t.Fatal("a plain Start's child outlived its thread: the kernel no longer ties Pdeathsig to the thread, and this test proves nothing")
				}
			}
		})
	}
}

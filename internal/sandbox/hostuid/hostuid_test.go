package hostuid

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestInUse: this process's uid is in use; a uid of a process started as
// it is, while that process runs, and not once it has ended.
func TestInUse(t *testing.T) {
	if used, err := InUse(os.Getuid()); err != nil || !used {
		t.Fatalf("InUse(own uid %d) = %v, %v", os.Getuid(), used, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("starting a process as another uid needs root")
	}
	const uid = 299998
	if used, _ := InUse(uid); used {
		t.Skipf("uid %d is in use on this host already", uid)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if used, err := InUse(uid); err != nil || !used {
		t.Errorf("InUse(%d) while a process runs as it = %v, %v", uid, used, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if used, err := InUse(uid); err != nil || used {
		t.Errorf("InUse(%d) after its process ended = %v, %v", uid, used, err)
	}
}

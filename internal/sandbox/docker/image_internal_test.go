package docker

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// TestImageRulesCoverEveryMount: the paths volumeTmpfs checks an image's
// volumes against are every mount the driver makes, so a mount added
// later cannot be shadowed by a volume unnoticed.
func TestImageRulesCoverEveryMount(t *testing.T) {
	d := &Driver{cfg: Config{Image: "img", Quota: QuotaWatch, GuestBinary: "/bin/true", StateDir: t.TempDir()}}
	ic := imageConfig{ref: "img", tmpfs: []string{"/data"}}
	_, hc := d.containerConfig(sandbox.Spec{}, record{State: State{UID: 200001, StateDir: t.TempDir(), WorkspaceDir: t.TempDir()}}, ic)
	for _, m := range hc.Mounts {
		if !slices.Contains(hostMounts, m.Target) {
			t.Errorf("mount %s is not in hostMounts", m.Target)
		}
	}
	for p := range hc.Tmpfs {
		if !slices.Contains(tmpfsMounts, p) && p != "/data" {
			t.Errorf("tmpfs %s is not in tmpfsMounts", p)
		}
	}
	if o := hc.Tmpfs["/data"]; !strings.Contains(o, "nosuid") || !strings.Contains(o, "uid=200001") || !strings.Contains(o, "size=") {
		t.Errorf("tmpfs for an image volume: %q", o)
	}
}

func TestVolumeTmpfs(t *testing.T) {
	got, err := volumeTmpfs("img", []string{"/workspace", "/workspace/", "/run/agentbox", "/tmp", "/home/agent", "/data", "/var/lib/db/", "/run", "/etc/passwd"})
	if err != nil || strings.Join(got, " ") != "/data /var/lib/db /run" {
		t.Errorf("volumeTmpfs = %q, %v", got, err)
	}
	for _, bad := range []string{"/workspace/cache", "/run/agentbox/sock", "/workspace/../workspace/x", "/", "rel", "/opt/agentbox/agentbox/x", "/proc", "/sys/fs/cgroup", "/dev"} {
		if _, err := volumeTmpfs("img", []string{bad}); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("VOLUME %q: err = %v, want ErrInvalidSpec", bad, err)
		}
	}
}

func TestGuestEnv(t *testing.T) {
	got := guestEnv([]string{"PATH=/x", "GODEBUG=a=1", "GOGC=off", "AGENTBOX_GUEST_SECRET=s", "AGENTBOX_X=1", "LD_PRELOAD=/e.so", "GOPATH=/go", "NOEQUALS"})
	want := []string{"GODEBUG=", "GOGC=", "AGENTBOX_GUEST_SECRET=", "AGENTBOX_X="}
	if !slices.Equal(got, want) {
		t.Errorf("guestEnv = %q, want %q", got, want)
	}
}

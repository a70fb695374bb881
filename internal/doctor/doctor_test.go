package doctor

import (
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/image"
)

func TestAccountsIn(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/bash\nsvc:x:100050:100050::/:/bin/false\nbad line\nlast:x:100099:1::/:/bin/sh\n"), 0o600)
	got, err := accountsIn(passwd, config.UIDRange{First: 100000, Last: 100099})
	if want := []string{"svc (100050)", "last (100099)"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("accountsIn = %v, %v, want %v", got, err, want)
	}
}

func TestFailed(t *testing.T) {
	if Failed([]Check{{Status: OK}, {Status: Warn}}) {
		t.Error("warnings failed the doctor")
	}
	if !Failed([]Check{{Status: OK}, {Status: Fail}}) {
		t.Error("a failed check did not fail the doctor")
	}
}

func TestGitCheck(t *testing.T) {
	if _, err := exec.LookPath("git"); err == nil {
		if c := gitCheck(); c.Status != OK {
			t.Errorf("with git: %+v", c)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if c := gitCheck(); c.Status != Warn || c.Fix == "" {
		t.Errorf("without git: %+v, want a warning with a fix", c)
	}
}

// TestDiskCheckFreeInodes: the disk check fails below the free-inodes
// floor as below the free-space one, and names the setting to change.
func TestDiskCheckFreeInodes(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Sandbox.MinFreeDisk, cfg.Sandbox.MinFreeInodes = 0, 1<<60
	d := doctor{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	if c := d.diskCheck(); c.Status != Fail || !strings.Contains(c.Fix, "AGENTBOX_MIN_FREE_INODES") || !strings.Contains(c.Detail, "inodes free") {
		t.Errorf("below the inodes floor: %+v, want a failure naming AGENTBOX_MIN_FREE_INODES", c)
	}
	cfg.Sandbox.MinFreeInodes = 1
	d.cfg = cfg
	if c := d.diskCheck(); c.Status == Fail {
		t.Errorf("above both floors: %+v", c)
	}
}

// TestFilesCheckUnlimited: an fs.file-max of LONG_MAX (Linux's default)
// is said to be unlimited, not "0% of fs.file-max 9223372036854775807";
// a finite one keeps its share, never a "0%" for a share that is not nothing.
func TestFilesCheckUnlimited(t *testing.T) {
	d := doctor{cfg: config.Default()}
	c := d.filesCheckOf(math.MaxInt64)
	if c.Status != OK || !strings.Contains(c.Detail, "fs.file-max is unlimited") || strings.Contains(c.Detail, "9223372036854775807") || strings.Contains(c.Detail, "%") {
		t.Errorf("unlimited fs.file-max: %+v", c)
	}
	c = d.filesCheckOf(1 << 40)
	if !strings.Contains(c.Detail, "<1% of fs.file-max 1099511627776") {
		t.Errorf("a large fs.file-max: %+v", c)
	}
	c = d.filesCheckOf(4 << 20)
	if !strings.Contains(c.Detail, "25% of fs.file-max 4194304") {
		t.Errorf("fs.file-max 4194304: %+v", c)
	}
}

// TestImageCheckLayers: doctor says which layer of the sandbox image is
// ready.
func TestImageCheckLayers(t *testing.T) {
	d := doctor{cfg: config.Default()}
	ready := image.Status{Present: true, Current: true}
	for _, tc := range []struct {
		name   string
		ls     image.Layers
		status string
		detail string
	}{
		{"both", image.Layers{Full: ready, Core: ready}, OK, "is current"},
		{"core only", image.Layers{Core: ready, CoreRef: "agentbox-sandbox-core:latest"}, Warn,
			"the core agentbox-sandbox-core:latest is ready, the desktop layer (agentbox-sandbox:latest) is not"},
		{"none", image.Layers{}, Fail, "is missing"},
		{"stale full", image.Layers{Full: image.Status{Present: true, Hash: "abc"}, Core: ready}, Fail, "another definition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := d.imageCheck(tc.ls, nil)
			if c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || (c.Status != OK && c.Fix == "") {
				t.Errorf("imageCheck = %+v; want %s with %q and a fix", c, tc.status, tc.detail)
			}
		})
	}
}

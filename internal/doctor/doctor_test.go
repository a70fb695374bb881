package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
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

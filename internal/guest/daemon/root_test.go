package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWalkNeverFollowsOut checks the walk alone, not os.Root behind it: on
// gVisor the walk is all that stops a link to a directory.
func TestWalkNeverFollowsOut(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"d/sub", "real"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	for link, target := range map[string]string{
		"etc-link": "/etc", "rel-out": "../../../../../etc", "d/up-out": "../../x",
		"in": "d/sub", "d/up-in": "../real", "via-in": "in/../../../etc", "chain": "etc-link/passwd",
		"loop-a": "loop-b", "loop-b": "loop-a", "file-link": "d/../real/f",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := openWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		name   string
		follow bool
		want   error
	}{
		{"etc-link/passwd", false, errEscape},
		{"etc-link", true, errEscape},
		{"rel-out/passwd", false, errEscape},
		{"d/up-out", true, errEscape},
		{"d/sub/../../..", false, errEscape},
		{"via-in/passwd", false, errEscape},
		{"chain", true, errEscape},
		{"loop-a/x", false, syscall.ELOOP},
		// A link whose last component is not followed is the link itself.
		{"etc-link", false, nil},
		{"chain", false, nil},
		// Links within the workspace are followed.
		{"in/new-file", false, nil},
		{"d/up-in/f", true, nil},
		{"file-link", true, nil},
		{"missing/deeper", true, nil},
		{".", true, nil},
	} {
		if err := w.walk("open", tc.name, tc.follow); !errors.Is(err, tc.want) {
			t.Errorf("walk %q (follow %v): %v, want %v", tc.name, tc.follow, err, tc.want)
		}
	}
}

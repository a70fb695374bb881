package lockfile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockIsExclusiveUntilReleased(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir, "x.lock", "held by %s: %s")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x.lock")); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want the pid", b)
	}
	want := "held by " + strconv.Itoa(os.Getpid()) + ": " + dir
	if _, err := Lock(dir, "x.lock", "held by %s: %s"); err == nil || err.Error() != want {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	unlock()
	unlock, err = Lock(dir, "x.lock", "held by %s: %s")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock()
}

// Package hostuid tells whether a host uid is in use by any process, for
// the drivers that give each sandbox a uid of its own from one range (the
// container tier's sandboxes, the microvm tier's QEMUs): a uid another
// sandbox's process holds is never handed out again.
package hostuid

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// InUse reports whether a process on the host runs as uid (real,
// effective, saved or file-system uid).
func InUse(uid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("host uids: %w", err)
	}
	want := strconv.Itoa(uid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		used := statusHasUID(f, want)
		f.Close()
		if used {
			return true, nil
		}
	}
	return false, nil
}

// statusHasUID reads a /proc/PID/status for its Uid line naming uid.
func statusHasUID(f *os.File, uid string) bool {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			for _, u := range strings.Fields(rest) {
				if u == uid {
					return true
				}
			}
			return false
		}
	}
	return false
}

package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessesNaming returns the pids of the processes whose program name
// starts with one of prefixes and whose command line names dir: the QEMU
// and virtiofsd processes of the microVMs whose state is under dir.
func ProcessesNaming(dir string, prefixes ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		name, _, _ := bytes.Cut(cmdline, []byte{0})
		for _, p := range prefixes {
			if strings.HasPrefix(filepath.Base(string(name)), p) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

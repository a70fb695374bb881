package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// stale is how long a replaced materialization is kept: a reader may
// still be streaming a zip or a file out of it.
const stale = 2 * time.Minute

// maxStale bounds the replaced materializations of a tree kept for their
// readers: a client that reads a running job's files after each of its
// steps makes a whole copy of the workspace each time, and a replica
// kept every one of them for stale, however many that filled its disk
// with. Only the newest replaced one stays; a reader of an older one
// finds its files gone.
const maxStale = 1

// removeOthers removes the materializations in jobDir but keep, except
// the newest maxStale made less than stale ago; the temporary directories
// of restores under way (".<digest>.restore-…") stay.
func removeOthers(jobDir, keep string) error {
	ents, err := os.ReadDir(jobDir)
	if err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	type made struct {
		name string
		at   time.Time
	}
	var others []made
	for _, e := range ents {
		if e.Name() == keep || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m := made{name: e.Name()} // no time: removed
		if fi, err := e.Info(); err == nil {
			m.at = fi.ModTime()
		}
		others = append(others, m)
	}
	slices.SortFunc(others, func(a, b made) int { return b.at.Compare(a.at) })
	var errs []error
	for i, m := range others {
		if i < maxStale && time.Since(m.at) < stale {
			continue
		}
		errs = append(errs, removeTree(filepath.Join(jobDir, m.name)))
	}
	return errors.Join(errs...)
}

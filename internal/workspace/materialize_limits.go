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

// idle is how long a job's materializations stay in the cache unread, and
// sweepEvery how often Materialize looks for those to remove: a replica
// that served the files of many jobs would keep a copy of each until the
// job was removed.
const (
	idle       = time.Hour
	sweepEvery = 10 * time.Minute
)

// used notes that job id's materializations were just read: its cache
// directory's mtime is when.
func (s *Shared) used(id string) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(s.cache, id), now, now)
}

// sweep removes, at most every sweepEvery, the cache directories of jobs
// whose materializations were not read for idle, and the temporary
// directories a crash left at the cache's top (".make-…"), under each
// job's lock so that no Materialize of it runs meanwhile.
func (s *Shared) sweep() {
	s.mu.Lock()
	due := time.Since(s.swept) >= sweepEvery
	if due {
		s.swept = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return
	}
	ents, err := os.ReadDir(s.cache)
	if err != nil {
		return
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < idle {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			_ = removeTree(filepath.Join(s.cache, e.Name()))
			continue
		}
		s.evict(e.Name())
	}
}

// evict removes job id's cache directory if it is still idle once its
// lock is held.
func (s *Shared) evict(id string) {
	lock := s.lock(id)
	lock.Lock()
	defer lock.Unlock()
	dir := filepath.Join(s.cache, id)
	if fi, err := os.Lstat(dir); err == nil && time.Since(fi.ModTime()) >= idle {
		_ = removeTree(dir)
	}
}

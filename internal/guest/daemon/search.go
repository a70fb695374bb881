package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"

	"github.com/agentbox/agentbox/internal/guest"
)

const (
	maxSearchFileBytes = 8 << 20
	maxMatchLineBytes  = 400
	defaultMaxResults  = 200
)

func (s *Server) searchFiles(w http.ResponseWriter, r *http.Request) {
	var req guest.SearchRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.search(req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) search(req guest.SearchRequest) (guest.SearchResult, error) {
	if req.Pattern == "" {
		return guest.SearchResult{}, guest.Errorf(guest.CodeBadRequest, "search: pattern is empty")
	}
	expr := req.Pattern
	if req.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return guest.SearchResult{}, guest.Errorf(guest.CodeBadRequest, "search: bad pattern: %v", err)
	}
	if req.Glob != "" {
		if _, err := path.Match(req.Glob, ""); err != nil {
			return guest.SearchResult{}, guest.Errorf(guest.CodeBadRequest, "search: bad glob %q", req.Glob)
		}
	}
	rel, err := s.rel(req.Path)
	if err != nil {
		return guest.SearchResult{}, err
	}
	max := req.MaxResults
	if max <= 0 || max > 10000 {
		max = defaultMaxResults
	}
	res := guest.SearchResult{Matches: []guest.Match{}}
	err = fs.WalkDir(s.root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return skipUnreadable(p, rel, err)
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if req.Glob != "" {
			if ok, _ := path.Match(req.Glob, d.Name()); !ok {
				return nil
			}
		}
		return s.searchFile(p, re, max, &res)
	})
	if err != nil && !errors.Is(err, errStop) {
		return guest.SearchResult{}, err
	}
	return res, nil
}

// searchFile appends the matches of one file, skipping binary and huge files.
func (s *Server) searchFile(p string, re *regexp.Regexp, max int, res *guest.SearchResult) error {
	data, err := s.readSmall(p)
	if err != nil || data == nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
		res.Skipped++
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxSearchFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !re.Match(line) {
			continue
		}
		if len(res.Matches) >= max {
			res.Truncated = true
			return errStop
		}
		if len(line) > maxMatchLineBytes {
			line = append(line[:maxMatchLineBytes:maxMatchLineBytes], "…"...)
		}
		res.Matches = append(res.Matches, guest.Match{Path: p, Line: n, Text: string(line)})
	}
	return nil
}

// readSmall reads a file if it is under the search size limit; nil if not.
func (s *Server) readSmall(p string) ([]byte, error) {
	f, fi, err := s.openRegular(p, os.O_RDONLY)
	if err != nil || fi.Size() > maxSearchFileBytes {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSearchFileBytes))
}

// Package docs_test checks that the documentation keeps up with the code.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage fails when a package of the module is
// not named in docs/architecture.md's package map, so that the map cannot
// drift from the tree again (issue 28 found eight packages missing).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := packages(t, "..")
	if !slices.Contains(pkgs, "internal/sandbox") || !slices.Contains(pkgs, "cmd/agentbox") {
		t.Fatalf("found %d packages, not the module's: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if !named(string(doc), p) {
			t.Errorf("docs/architecture.md does not name package %s/: add it to the package map", p)
		}
	}
}

// named reports whether doc names the package at path p as a whole path
// (internal/llm, not only internal/llm/openai), with or without a trailing
// slash.
func named(doc, p string) bool {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_./-])` + regexp.QuoteMeta(p) + `/?([^A-Za-z0-9_./-]|$)`)
	return re.MatchString(doc)
}

// packages lists the module's packages under root as go list ./... does:
// every directory holding a .go file, but testdata and directories whose
// names start with "." or "_".
func packages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(seen, ".")
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

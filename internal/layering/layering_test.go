package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/agentbox/agentbox/"

// leaves are the packages at the bottom: each imports no other agentbox
// package, so anything may import them.
var leaves = []string{"internal/units", "internal/imagename", "internal/netpolicy", "internal/tarpack"}

// rules are the layers: a package matching pkg (a path, or a prefix
// ending in "/...") may depend, directly or not, on no package matching
// one of never; with only, on no agentbox package but those.
var rules = []struct {
	pkg   string
	never []string
	only  []string
}{
	{pkg: "internal/config", only: leaves},
	{pkg: "internal/wire", only: leaves},
	{pkg: "internal/client", only: append([]string{"internal/wire"}, leaves...)},
	{pkg: "internal/sandbox/...", never: []string{"internal/doctor/...", "internal/jobs/...", "internal/api/...", "internal/wiring/...", "internal/ui/...", "cmd/..."}},
	{pkg: "internal/store/...", never: []string{"internal/jobs/...", "internal/api/...", "internal/wiring/...", "internal/sandbox/..."}},
	{pkg: "internal/jobs/...", never: []string{"internal/api/...", "internal/wiring/...", "internal/ui/...", "internal/doctor/...", "cmd/..."}},
	{pkg: "internal/api/...", never: []string{"internal/wiring/...", "cmd/..."}},
	{pkg: "internal/...", never: []string{"cmd/..."}},
}

// deps maps each agentbox package (without the module's prefix) to the
// agentbox packages it depends on, directly or not, tests left out.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	m, err := listDeps()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// listDeps runs go list once for all the tests.
var listDeps = sync.OnceValues(func() (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.Bytes())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		pkg, ok := strings.CutPrefix(f[0], module)
		if !ok {
			continue
		}
		m[pkg] = []string{}
		for _, d := range f[1:] {
			if d, ok := strings.CutPrefix(d, module); ok {
				m[pkg] = append(m[pkg], d)
			}
		}
	}
	return m, sc.Err()
})

// matches reports whether pkg matches pattern: a path, or "dir/..." for
// dir and everything beneath.
func matches(pkg, pattern string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return pkg == pattern
}

// pending are the dependencies against the layers still being undone,
// each with why: a rule whose only breaches are these is skipped, saying
// so, rather than failed; any other breach fails it. None today: issue 28
// moved kvmprobe under the microvm tier, the last one.
var pending = map[string]string{}

func matchesAny(pkg string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(pkg, p) })
}

// TestLayers: no package depends on one above it (the rules), and each
// leaf imports no other agentbox package.
func TestLayers(t *testing.T) {
	all := deps(t)
	for _, leaf := range leaves {
		d, ok := all[leaf]
		if !ok {
			t.Errorf("leaf %s: no such package", leaf)
		}
		if len(d) > 0 {
			t.Errorf("leaf %s imports %v: a leaf imports no agentbox package", leaf, d)
		}
	}
	for _, r := range rules {
		t.Run(strings.ReplaceAll(r.pkg, "/", "_"), func(t *testing.T) {
			found := false
			var skips []string
			for pkg, d := range all {
				if !matches(pkg, r.pkg) {
					continue
				}
				found = true
				for _, dep := range d {
					if !matchesAny(dep, r.never) && (r.only == nil || matchesAny(dep, r.only)) {
						continue
					}
					if why, ok := pending[dep]; ok {
						skips = append(skips, pkg+" depends on "+dep+": "+why)
						continue
					}
					t.Errorf("%s depends on %s: against the layers (%s)", pkg, dep, r.pkg)
				}
			}
			if !found {
				t.Errorf("no package matches %s", r.pkg)
			}
			if len(skips) > 0 && !t.Failed() {
				slices.Sort(skips)
				t.Skip("known, being undone: " + strings.Join(skips, "; "))
			}
		})
	}
}

// TestClientSmall: the API client, the future public Go client, depends
// on at most three agentbox packages (wire and leaves).
func TestClientSmall(t *testing.T) {
	if d := deps(t)["internal/client"]; len(d) > 3 {
		t.Errorf("internal/client depends on %d agentbox packages, want at most 3: %v", len(d), d)
	}
}

// TestConfigAlone: config imports no agentbox package but the leaves
// (units, imagename), so that any package may read its settings and
// config never depends on what it configures.
func TestConfigAlone(t *testing.T) {
	for _, dep := range deps(t)["internal/config"] {
		if !slices.Contains(leaves, dep) {
			t.Errorf("internal/config depends on %s", dep)
		}
	}
}

package ignore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/ignore"
)

// TestHostileRulesBounded is a sandbox's attack on the server's CPU: a
// workspace whose .gitignore files hold as many costly rules as they may
// (each against a long path: linear, but rules × bytes × states), in
// every directory on the way down, then a listing of a directory of many
// long names. What one listing's matcher costs must stay bounded, not be
// hours of a core (it was ~0.35 s a name, for 100,000 names): a few
// seconds of matching at most.
func TestHostileRulesBounded(t *testing.T) {
	dir := t.TempDir()
	var sb strings.Builder
	for i := 0; sb.Len() < ignore.MaxFileBytes-64; i++ {
		fmt.Fprintf(&sb, "**/a*b*c*d*e*f*g*h*%d\n", i)
	}
	rules := []byte(sb.String())
	deep := "."
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(dir, deep, ".gitignore"), rules, 0o644); err != nil {
			t.Fatal(err)
		}
		deep = filepath.Join(deep, fmt.Sprint("d", i))
		if err := os.Mkdir(filepath.Join(dir, deep), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// One line as long as a .gitignore holds: costly to compile.
	long := "**/" + strings.Repeat("a*", (ignore.MaxFileBytes-8)/2) + "z\n"
	if err := os.WriteFile(filepath.Join(dir, deep, ".gitignore"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	start := time.Now()
	m := ignore.Load(root, filepath.ToSlash(deep))
	name := strings.Repeat("abcdefgh", 30)
	for i := range 1000 {
		m.Hidden(fmt.Sprintf("%s/%s%d", filepath.ToSlash(deep), name, i), false)
		if took := time.Since(start); took > 10*time.Second { // was ~350 s
			t.Fatalf("loading the rules and matching %d names took %v", i+1, took)
		}
	}
	t.Logf("loading the rules and matching 1000 names took %v", time.Since(start))
	if !m.Hidden("__pycache__", true) {
		t.Error("a cache directory is not hidden once the rules' budget is spent")
	}
}

// TestManyRulesStillApply: the bound on the rules tried leaves an
// ordinary project alone: a .gitignore of a few hundred rules applies to
// every entry of a directory of a thousand, three levels down. (The time
// bound is TestHostileRulesBounded's: here it is lifted, since under the
// race detector on a loaded machine these 900,000 matches take more than
// its three seconds.)
func TestManyRulesStillApply(t *testing.T) {
	var rules []string
	for i := range 300 {
		rules = append(rules, fmt.Sprintf("*.ext%d", i), fmt.Sprintf("/build%d/", i), fmt.Sprintf("**/cache%d/**", i))
	}
	m := &ignore.Matcher{}
	ignore.SetMatchBudget(m, time.Hour)
	m.Add("", strings.Join(append(rules, "*.log"), "\n"))
	for i := range 1000 {
		p := fmt.Sprintf("src/module/pkg/some_longer_file_name_%04d.log", i)
		if !m.Hidden(p, false) {
			t.Fatalf("%s is not hidden (the %dth name listed)", p, i+1)
		}
	}
}

package wiring

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/config"
)

// TestApplyServeFlags: serve's flags given win over the environment, but
// --data-dir (applied by the root, made absolute); the result is checked.
func TestApplyServeFlags(t *testing.T) {
	parse := func(args ...string) (config.Config, error) {
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		var addr, dataDir, viewURL string
		var concurrency int
		fs.StringVar(&addr, "addr", "", "")
		fs.StringVar(&dataDir, "data-dir", "", "")
		fs.StringVar(&viewURL, "view-url", "", "")
		fs.IntVar(&concurrency, "concurrency", 0, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c := config.Default()
		c.DataDir = "/srv/agentbox"
		return c, ApplyServeFlags(&c, fs)
	}
	c, err := parse("--addr", "127.0.0.1:9001", "--concurrency", "0", "--data-dir", "rel")
	if err != nil || c.Server.Addr != "127.0.0.1:9001" || c.Server.Concurrency != 0 || c.DataDir != "/srv/agentbox" {
		t.Fatalf("applied: %+v %q %v", c.Server, c.DataDir, err)
	}
	if _, err := parse("--view-url", "https://view.example.com"); err == nil || !strings.Contains(err.Error(), "view URL") {
		t.Fatalf("a view URL of no {job}: %v", err)
	}
}

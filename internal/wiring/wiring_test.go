package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
)

// TestClosersCloseLastFirst: what was opened last is closed first, every
// closer runs even when one fails, and a second Close does nothing.
func TestClosersCloseLastFirst(t *testing.T) {
	var c closers
	var order []string
	failed := errors.New("driver close failed")
	c.addFunc(func() { order = append(order, "store") })
	c.add(func() error { order = append(order, "driver"); return failed })
	c.addFunc(func() { order = append(order, "janitor") })
	if err := c.Close(); !errors.Is(err, failed) {
		t.Errorf("Close: %v, want the driver's error", err)
	}
	if want := []string{"janitor", "driver", "store"}; !slices.Equal(order, want) {
		t.Errorf("closed %v, want %v", order, want)
	}
	if err := c.Close(); err != nil || len(order) != 3 {
		t.Errorf("second Close: %v, closed %v", err, order)
	}
}

func TestCheckViewURL(t *testing.T) {
	tests := []struct {
		name string
		s    config.Server
		want string // in the error; empty: accepted
	}{
		{name: "none", s: config.Server{}},
		{name: "a label per job", s: config.Server{ViewURL: "https://{job}.view.example.com"}},
		{name: "no job label", s: config.Server{ViewURL: "https://view.example.com"}, want: "view URL"},
		{name: "no auth off loopback", s: config.Server{ViewURL: "https://{job}.view.example.com", NoAuth: true}, want: "loopback names only"},
		{name: "no auth on localhost", s: config.Server{ViewURL: "http://{job}.localhost:8080", NoAuth: true}},
		{name: "public URL under the views", s: config.Server{ViewURL: "https://{job}.example.com", PublicURL: "https://agentbox.example.com"},
			want: "under the views' domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckViewURL(tt.s)
			if tt.want == "" && err != nil {
				t.Errorf("err = %v, want none", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestBenchAPI: the bench server answers with its token, and Close stops
// it and removes its directory.
func TestBenchAPI(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	b, err := OpenBenchAPI(context.Background(), config.Default())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", b.URL+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+b.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/jobs: %d", resp.StatusCode)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := http.Get(b.URL + "/healthz"); err == nil {
		t.Error("the bench server still answers after Close")
	}
}

// TestNoGitMeansNoRepos: a host without git runs jobs without a snapshot
// instead of failing each one on it; with git, the repos are there.
func TestNoGitMeansNoRepos(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	if _, err := exec.LookPath("git"); err == nil {
		r, err := newRepos(cfg, cfg.DataDir, slog.New(slog.DiscardHandler))
		if err != nil || r == nil {
			t.Fatalf("with git: newRepos = %v, %v; want repos", r, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	r, err := newRepos(cfg, cfg.DataDir, slog.New(slog.DiscardHandler))
	if err != nil || r != nil {
		t.Fatalf("without git: newRepos = %v, %v; want none and no error", r, err)
	}
}

// TestEgressNeverServer: the workers' proxies are told the server's own
// listener, which no sandbox reaches whatever ALLOW_PRIVATE opens.
func TestEgressNeverServer(t *testing.T) {
	cfg := config.Config{}
	cfg.Server.Addr = "127.0.0.1:0"
	e, err := newEgress(cfg, nil, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(e.Options.Never) != "[127.0.0.1:8080]" {
		t.Errorf("Never %v, want [127.0.0.1:8080]", e.Options.Never)
	}
	// exec and chat: the configured address, a server of this machine's.
	for addr, want := range map[string]string{"127.0.0.1:8080": "[127.0.0.1:8080]", ":9000": "[0.0.0.0:9000]",
		"localhost:80": "[127.0.0.1:80]", "[::1]:8080": "[[::1]:8080]", "host.example:80": "[]"} {
		cfg.Server.Addr = addr
		if got := fmt.Sprint(egressOptions(cfg, egress.Loaded{}).Never); got != want {
			t.Errorf("AGENTBOX_ADDR %s: Never %s, want %s", addr, got, want)
		}
	}
}

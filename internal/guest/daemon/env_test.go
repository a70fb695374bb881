package daemon

import (
	"context"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/output"
)

func TestCommandsSeeTheDisplay(t *testing.T) {
	s, err := New(Config{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := output.NewCapture(100)
	if _, err := s.run(context.Background(), guest.Shell(`printf %s "$DISPLAY"`), out, output.NewCapture(100)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := out.Result(); string(got) != guest.Display {
		t.Errorf("DISPLAY = %q, want %q", got, guest.Display)
	}
	// A caller's own DISPLAY still wins (the last value counts).
	if env, _ := s.env(map[string]string{"DISPLAY": ":7"}); env[len(env)-1] != "DISPLAY=:7" {
		t.Errorf("env ends %q", env[len(env)-1])
	}
}

package forge_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/forge"
	"github.com/agentbox/agentbox/internal/forge/forgetest"
)

// TestOpenAgainFindsTheFirst: a continued job opens its pull request
// again; the service says it exists, and Open returns the one it opened.
func TestOpenAgainFindsTheFirst(t *testing.T) {
	for _, kind := range []forge.Kind{forge.KindGitHub, forge.KindGitea} {
		t.Run(string(kind), func(t *testing.T) {
			s := forgetest.New(t, kind, testToken)
			c := forge.New([]forge.Host{s.Host("git.example.com")}, nil)
			first, err := c.Open(ctxTimeout(t), testRemote, basePR())
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.Open(ctxTimeout(t), testRemote, basePR())
			if err != nil || again != first {
				t.Fatalf("second Open = %+v, %v; want %+v", again, err, first)
			}
			if creates, lists := s.Recorded(); len(creates) != 2 || len(lists) == 0 || len(s.OpenPulls()) != 1 {
				t.Errorf("%d creates, %d lists, %d open", len(creates), len(lists), len(s.OpenPulls()))
			}
		})
	}
}

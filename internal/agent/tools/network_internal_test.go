package tools

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
)

// TestDenialNoteNamesABoundThatClosed: a connection the job's bytes bound
// closed is named with why, next to a refused host; an allowed connection
// that ended normally is not.
func TestDenialNoteNamesABoundThatClosed(t *testing.T) {
	note := denialNote([]event.Network{
		{Host: "ok.test", Port: 443, Decision: "allow"},
		{Host: "big.test", Port: 443, Decision: "allow", Error: "egress bytes bound (4194304) reached"},
		{Host: "evil.test", Port: 443, Decision: "deny", Reason: "evil.test:443 is not in the job's allow list"},
	})
	for _, want := range []string{"big.test:443 (closed: egress bytes bound (4194304) reached)", "evil.test:443 (not in the job's allow list)"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if strings.Contains(note, "ok.test") {
		t.Errorf("note %q names a connection that ended normally", note)
	}
}

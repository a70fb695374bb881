package jobs

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestCatchUp: a message sent to a running job whose turn ended before
// the model was given it starts the next turn; one a model event says was
// read, one to a canceled turn, or one to a turn already followed by
// another does not.
func TestCatchUp(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  store.Status
		read    bool // a model event after the message read it
		turn    int  // the job's turn when the message is looked at
		started bool
	}{
		{"came as the turn ended", store.StatusComplete, false, 1, true},
		{"came as the turn failed", store.StatusError, false, 1, true},
		{"read before the end", store.StatusComplete, true, 1, false},
		{"turn canceled", store.StatusCanceled, false, 1, false},
		{"next turn already started", store.StatusComplete, false, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentbox.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := NewService(ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir)})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			j, _, err := st.CreateJob(t.Context(), store.Job{ID: NewID(), Task: "t", Status: tt.status, Turn: tt.turn,
				MaxAttempts: 3, CreatedAt: now, EndedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			msg, err := s.feed.append(t.Context(), j.ID, event.Message{Text: "also this", Turn: 1})
			if err != nil {
				t.Fatal(err)
			}
			if tt.read {
				_ = s.feed.emit(t.Context(), j.ID, event.Model{Step: 3, Seen: msg.Seq, Message: llm.Text(llm.RoleAssistant, "ok")})
			}
			got, err := s.catchUp(t.Context(), store.Job{ID: j.ID, Turn: 1}, msg.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if started := got.Status == store.StatusPending && got.Turn == tt.turn+1; started != tt.started {
				t.Errorf("job %s turn %d; want a turn started: %v", got.Status, got.Turn, tt.started)
			}
		})
	}
}

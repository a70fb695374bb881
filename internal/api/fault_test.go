package api_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// fakeService is a hand-written api.Service for failures a real store does
// not produce on demand. Unset functions panic.
type fakeService struct {
	get func(id string) (store.Job, error)
}

func (f fakeService) Submit(context.Context, jobs.SubmitRequest) (store.Job, bool, error) {
	panic("not used")
}
func (f fakeService) Get(_ context.Context, id string) (store.Job, error) { return f.get(id) }
func (f fakeService) List(context.Context, store.ListOptions) (store.JobPage, error) {
	return store.JobPage{}, errors.New("database is locked")
}
func (f fakeService) Cancel(context.Context, string) (store.Job, error)  { panic("not used") }
func (f fakeService) QueuePosition(context.Context, string) (int, error) { panic("not used") }
func (f fakeService) Workers(context.Context) ([]jobs.WorkerStatus, error) {
	panic("not used")
}
func (f fakeService) Events(context.Context, string, int64, int) ([]store.Event, error) {
	panic("not used")
}
func (f fakeService) WaitEvents(context.Context, string, int64, time.Duration) error {
	panic("not used")
}
func (f fakeService) Workspace(context.Context, string) (workspace.Store, error) {
	panic("not used")
}
func (f fakeService) Guest(context.Context, string) (*guest.Client, error) { panic("not used") }
func (f fakeService) Artifacts(context.Context, string, io.Writer, artifact.Options) (artifact.Report, error) {
	panic("not used")
}
func (f fakeService) Diff(context.Context, string, bool, io.Writer) error { panic("not used") }
func (f fakeService) SetNetwork(context.Context, string, egress.Policy) (egress.Policy, error) {
	panic("not used")
}
func (f fakeService) Network(context.Context, string) (jobs.NetworkSummary, error) {
	panic("not used")
}

func TestServerFaultsAreGenericLogged500s(t *testing.T) {
	var logs testenv.Buffer
	svc := fakeService{get: func(id string) (store.Job, error) {
		if id == "job_panic" {
			panic("nil map somewhere")
		}
		return store.Job{}, errors.New("disk on fire")
	}}
	srv := httptest.NewServer(api.New(api.Config{NoAuth: true}, svc, nil, slog.New(slog.NewTextHandler(&logs, nil))))
	defer srv.Close()
	e := envFor(srv)
	for _, tt := range []struct{ path, secret, logged string }{
		{"/v1/jobs/job_panic", "nil map", "panicked"},
		{"/v1/jobs/job_broken", "disk on fire", "disk on fire"},
		{"/v1/jobs", "database is locked", "database is locked"},
	} {
		resp, b := do(t, e, req{method: "GET", path: tt.path, noAuth: true})
		got := wantError(t, resp, b, 500, wire.CodeInternal)
		if strings.Contains(got.Message, tt.secret) {
			t.Errorf("%s: message %q leaks the cause", tt.path, got.Message)
		}
		if l := logs.String(); !strings.Contains(l, tt.logged) {
			t.Errorf("%s: log lacks %q:\n%s", tt.path, tt.logged, l)
		}
	}
	if l := logs.String(); !strings.Contains(l, "job_id=job_broken") {
		t.Errorf("log lacks the job id:\n%s", l)
	}
}

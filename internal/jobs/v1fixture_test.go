//go:build v1fixture

package jobs

// This file writes testdata/v1-store.db, the store a server of the release
// before the sandbox contract v2 (handles without a version, the Docker
// driver's fields at their top level) leaves behind when it dies while a
// job runs. The v1 recovery test (v1_recover_test.go) upgrades it.
//
// It compiles only against that release's code: sandbox.Handle still has
// Ref, StateDir and the other engine fields there. To regenerate the
// fixture, check out the commit that added this file (the code there is
// still v1) and run, with Docker and the sandbox image present, as root:
//
//	git worktree add /tmp/agentbox-v1 $(git log --diff-filter=A --format=%h -- internal/jobs/v1fixture_test.go)
//	cd /tmp/agentbox-v1
//	go test -tags v1fixture -run TestWriteV1Fixture ./internal/jobs/ -v -args -v1fixture-out=$REPO/internal/jobs/testdata/v1-store.db
//
// The store is made by that release's SQLite store, the job by its
// Service.Submit and the store's ClaimJob (running, leased by worker
// V1FixtureWorker), and the handle is a real sandbox's, made by that
// release's Docker driver and saved by the scheduler's own saveHandle. The
// sandbox is removed afterwards: a checked-in file cannot hold a running
// container, so the test makes one and writes its values into the handle.

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/testenv"
)

var v1FixtureOut = flag.String("v1fixture-out", "testdata/v1-store.db", "where to write the v1 store fixture")

// Values the v1 recovery test relies on.
const (
	v1FixtureWorker = "w1"
	// v1FixtureTask reads a file the sandbox keeps in /tmp (not in the
	// workspace): it is only there if the job goes on in the same sandbox.
	v1FixtureTask = "cat /tmp/v1-marker > marker.txt"
)

func TestWriteV1Fixture(t *testing.T) {
	testenv.DockerWithImage(t)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "abv1")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db := filepath.Join(dir, "agentbox.db")
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(st, dir, 3, nil)
	j, _, err := svc.Submit(ctx, SubmitRequest{Task: v1FixtureTask})
	if err != nil {
		t.Fatal(err)
	}
	if j, err = st.ClaimJob(ctx, v1FixtureWorker, time.Minute); err != nil || j.Status != store.StatusRunning {
		t.Fatalf("claim: %+v %v", j, err)
	}
	h := v1Handle(t, dir, j.ID)
	sched := NewScheduler(SchedulerConfig{WorkerID: v1FixtureWorker, DataDir: dir}, st, nil, nil, nil)
	if err := sched.saveHandle(ctx, j.ID, h); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db + "-wal"); err == nil {
		t.Fatal("the store left a WAL file: the fixture would miss what it holds")
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*v1FixtureOut, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: job %s, handle %+v", *v1FixtureOut, j.ID, h)
}

// v1Handle makes a sandbox for job id as the v1 scheduler does, and
// returns its handle once it is removed.
func v1Handle(t *testing.T, dir, id string) sandbox.Handle {
	bin, cleanup, err := testenv.BuildGuest()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	d, err := docker.New(docker.Config{Image: testenv.Image(), GuestBinary: bin, StateDir: filepath.Join(dir, "sandboxes"),
		Instance: "jobtest-v1fixture"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ws := WorkspaceDir(dir, id)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Start(context.Background(), d, sandbox.Spec{Owner: v1FixtureWorker}, sandbox.Binding{JobID: id, WorkspaceDir: ws, ManagedWorkspace: true, WebBase: WebBase(id)})
	if err != nil {
		t.Fatal(err)
	}
	h := sb.Handle()
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

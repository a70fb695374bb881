package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

func TestDeleteCmd(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	e.Start(id)
	_, _, err := runClient(context.Background(), "", "delete", id)
	if err == nil || !strings.Contains(err.Error(), "cancel it first") {
		t.Errorf("delete of a running job: %v", err)
	}
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "a.txt", "a")
	if out, _ := mustRun(t, "delete", id); out != id+": data deleted\n" {
		t.Errorf("delete: %q", out)
	}
	if _, err := os.Stat(e.Workspaces.Dir(id)); !os.IsNotExist(err) {
		t.Errorf("workspace after delete: %v", err)
	}
	if out, _ := mustRun(t, "delete", "--json", id); !strings.Contains(out, `"deleted_at"`) {
		t.Errorf("second delete --json: %s", out)
	}
	if out, _ := mustRun(t, "delete", id); !strings.HasPrefix(out, id+": already deleted at ") {
		t.Errorf("second delete: %q, want it to say the job already was", out)
	}
	out, _ := mustRun(t, "status", id)
	if !strings.Contains(out, "complete, deleted") || !strings.Contains(out, "deleted:") ||
		strings.Contains(out, "agentbox download") || strings.Contains(out, "agentbox diff") {
		t.Errorf("status of a deleted job:\n%s", out)
	}
	if out, _ := mustRun(t, "list"); !strings.Contains(out, "complete, deleted") {
		t.Errorf("list with a deleted job:\n%s", out)
	}
	_, _, err = runClient(context.Background(), "", "download", "-o", t.TempDir()+"/x.zip", id)
	if err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("download after delete: %v", err)
	}
}

package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/workspace"
	"github.com/agentbox/agentbox/internal/workspace/workspacetest"
)

func TestLocal(t *testing.T) {
	workspacetest.Run(t, func(t *testing.T) workspace.Store { return workspace.NewLocal(t.TempDir()) })
}

func TestSessions(t *testing.T) {
	workspacetest.Run(t, func(t *testing.T) workspace.Store { return workspace.NewSessions(t.TempDir()) })
}

// TestLocalLayout: a job's workspace is <data dir>/workspaces/<id>, and a
// chat session's <dir>/<name>/workspace, as every earlier release kept
// them.
func TestLocalLayout(t *testing.T) {
	data := t.TempDir()
	for _, tt := range []struct {
		s    *workspace.Local
		want string
	}{
		{workspace.NewLocal(data), filepath.Join(data, "workspaces", "job_a")},
		{workspace.NewSessions(filepath.Join(data, "chats")), filepath.Join(data, "chats", "job_a", "workspace")},
	} {
		dir, err := tt.s.Prepare(t.Context(), "job_a")
		if err != nil || dir != tt.want || tt.s.Dir("job_a") != tt.want {
			t.Errorf("Prepare = %q, %v, Dir = %q; want %q", dir, err, tt.s.Dir("job_a"), tt.want)
		}
		if fi, err := os.Stat(tt.want); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory: %v", tt.want, err)
		}
	}
}

// TestLocalLinkInPlace: a symlink put in a workspace's place is neither
// opened, nor prepared for a sandbox, nor followed by Remove, which
// removes the link itself.
func TestLocalLinkInPlace(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "keep.txt"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := workspace.NewLocal(data)
	if err := os.MkdirAll(filepath.Join(data, "workspaces"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, s.Dir("job_a")); err != nil {
		t.Fatal(err)
	}
	if root, err := s.Open(t.Context(), "job_a"); !errors.Is(err, workspace.ErrNotFound) {
		if err == nil {
			root.Close()
		}
		t.Errorf("Open of a link in the workspace's place: %v, want ErrNotFound", err)
	}
	if ok, err := s.Exists(t.Context(), "job_a"); ok || err != nil {
		t.Errorf("Exists = %v, %v; want false", ok, err)
	}
	if dir, err := s.Prepare(t.Context(), "job_a"); err == nil {
		t.Errorf("Prepare returned %s, a link to another directory, for a driver to mount", dir)
	}
	if err := s.Remove(t.Context(), "job_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.Dir("job_a")); !os.IsNotExist(err) {
		t.Errorf("the link survived Remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "keep.txt")); err != nil {
		t.Errorf("Remove followed the link: %v", err)
	}
}

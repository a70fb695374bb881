package githost

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// commitWorkspace makes a host git dir whose base is the empty workspace
// work, runs fill on work, and commits it on branch "b". It returns the
// commit and the git dir.
func commitWorkspace(t *testing.T, fill func(work string)) (string, string, error) {
	t.Helper()
	dir := t.TempDir()
	work, gitDir := filepath.Join(dir, "ws"), filepath.Join(dir, "job.git")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Snapshot(ctx, gitDir, work); err != nil {
		t.Fatal(err)
	}
	fill(work)
	commit, _, err := h.Commit(ctx, gitDir, work, "b", "m\n")
	return commit, gitDir, err
}

// A workspace past the entry bound (millions of tiny files) made a commit
// of part of it, silently: pushed, the rest looked deleted.
func TestCommitRefusesTooManyEntries(t *testing.T) {
	defer func(n int) { maxTreeEntries = n }(maxTreeEntries)
	maxTreeEntries = 5
	_, _, err := commitWorkspace(t, func(work string) {
		for i := range 8 {
			if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err == nil || !strings.Contains(err.Error(), "over the 5 entries") {
		t.Fatalf("commit of 8 files past a bound of 5: %v, want refused", err)
	}
}

// A path past maxPathBytes was left out of the commit, silently.
func TestCommitRefusesTooLongPaths(t *testing.T) {
	_, _, err := commitWorkspace(t, func(work string) {
		root, err := os.OpenRoot(work)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		p := strings.Repeat("d", 200)
		for len(p) < maxPathBytes+300 {
			if err := root.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			p += "/" + strings.Repeat("d", 200)
		}
		if err := root.WriteFile(filepath.Dir(p)+"/deep.txt", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "a path of 4096 bytes or more") {
		t.Fatalf("commit of a path past %d bytes: %v, want refused", maxPathBytes, err)
	}
}

// TestBoundsBeforeGitRuns: the bounds are on the process before the
// program it runs starts (no window in which git runs unbounded): the
// "git" here prints its own limits and nice value at its first step.
func TestBoundsBeforeGitRuns(t *testing.T) {
	h, err := New(Config{Git: "/bin/cat", Memory: 96 << 20, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.git(context.Background(), run{args: []string{"/proc/self/limits", "/proc/self/stat"}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"Max data size             100663296            100663296", "Max cpu time              90                   91"} {
		if !strings.Contains(s, want) {
			t.Errorf("limits lack %q:\n%s", want, s)
		}
	}
	// /proc/self/stat: "pid (comm) state ..."; nice is the 19th field.
	_, rest, _ := strings.Cut(s, ") ")
	if f := strings.Fields(rest); len(f) < 17 || f[16] != "10" {
		t.Errorf("nice value = %v, want 10", f[16:17])
	}
}

// walkNotes walks work into gitDir's objects and returns the notes, and
// the bytes of disk the walk's shadow worktree took.
func walkNotes(t *testing.T, work string) (treeNotes, int64) {
	t.Helper()
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(t.TempDir(), "job.git")
	if err := h.InitBare(context.Background(), gitDir); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(gitDir, "agentbox-tree-")
	if err != nil {
		t.Fatal(err)
	}
	notes, err := h.walkTree(context.Background(), gitDir, work, "", tmp, io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	return notes, diskUsage(t, tmp)
}

// diskUsage is what the tree under dir takes of the disk, each inode
// counted once.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	seen, total := map[uint64]bool{}, int64(0)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); !seen[st.Ino] {
			seen[st.Ino], total = true, total+st.Blocks*512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// bigRules is a .gitignore of about maxIgnoreBytes ignoring *.log, its
// comment lines starting with tag.
func bigRules(tag string) []byte {
	line := "# " + tag + " a comment to fill the file\n"
	return []byte(strings.Repeat(line, (maxIgnoreBytes-64)/len(line)) + "*.log\n")
}

// Each hard link to a 4 MiB .gitignore was copied whole into the shadow
// worktree, on the host's disk: 300 links made 1.2 GiB per diff. Links
// share one copy; distinct files stop at maxRuleBytes, and are then
// taken as absent with a note.
func TestRuleFilesAreCopiedOnceWithinABudget(t *testing.T) {
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, ".gitignore"), bigRules("root"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		d := filepath.Join(work, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(work, ".gitignore"), filepath.Join(d, ".gitignore")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 { // 48 MiB of distinct rules
		d := filepath.Join(work, fmt.Sprintf("e%02d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".gitignore"), bigRules(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	notes, used := walkNotes(t, work)
	t.Logf("the shadow worktree took %d KiB for 300 links to one 4 MiB .gitignore and 12 distinct ones", used>>10)
	if used > maxRuleBytes {
		t.Errorf("the shadow worktree took %d bytes, over the %d of the budget", used, maxRuleBytes)
	}
	if n := notes.rules.len(); n == 0 || n >= 12 || !strings.Contains(notes.rules.first(1), "over the 33554432 bytes of .gitignore copies") {
		t.Errorf("%d rule files noted as absent (%s), want some of the 12 distinct ones", n, notes.rules.first(3))
	}
	if n := notes.lacking.len(); n != 0 {
		t.Errorf("notes of files left out: %s", notes.lacking.first(5))
	}
}

// A .gitignore at a path of 4,026 bytes was copied by its absolute path,
// past PATH_MAX: the diff failed, the zip lost its diff, and the commit
// failed. Copied beneath the shadow worktree's handle, its rules work.
func TestCommitWithALongPathRuleFile(t *testing.T) {
	var deep string
	commit, gitDir, err := commitWorkspace(t, func(work string) {
		root, err := os.OpenRoot(work)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		for i := range 16 {
			deep = path.Join(deep, fmt.Sprintf("d%02d", i)+strings.Repeat("x", 247))
		}
		if err := root.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{".gitignore": "*.log\n", "keep.txt": "kept\n", "x.log": "ignored\n"} {
			if err := root.WriteFile(deep+"/"+name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil {
		t.Fatalf("commit of a workspace with a .gitignore at a path of %d bytes: %v", len(deep)+11, err)
	}
	h, _ := New(Config{})
	out, err := h.git(context.Background(), run{args: []string{"ls-tree", "-r", "-z", "--name-only", commit}, gitDir: gitDir})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if want := []string{deep + "/.gitignore", deep + "/keep.txt"}; !slices.Equal(got, want) {
		t.Errorf("the commit holds %d paths, want the rules and keep.txt (x.log ignored): %.300q", len(got), got)
	}
}

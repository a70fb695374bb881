package main

import (
	"archive/zip"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// editScript reads app.py in its first tool call, then changes the
// workspace: app.py rewritten, new files, a symlink leading out.
func editScript() llmtest.Script {
	return llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "cat app.py"})),
		step(llmtest.Call("bash", map[string]any{"command": "echo changed > app.py && echo new > new.txt && mkdir -p sub && touch sub/x && ln -s /etc/passwd leak"})),
		step(llmtest.Call("finish", map[string]any{"summary": "edited"})),
	}}
}

// userDir makes a person's directory holding app.py, owned by uid.
func userDir(t *testing.T, uid int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte("print('FROM-THE-USER')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "app.py")} {
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunWorkspaceCopy: run --workspace works on a copy: the first tool
// call sees DIR's files, DIR is left as it was, and run says where the
// result is.
func TestRunWorkspaceCopy(t *testing.T) {
	instance := sandboxEnv(t)
	useModel(t, editScript())
	dir := userDir(t, os.Getuid())
	out, errOut, err := run(context.Background(), "run", "--workspace", dir, "Edit app.py")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "FROM-THE-USER") {
		t.Errorf("the first tool call did not see app.py:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.py")); string(b) != "print('FROM-THE-USER')\n" {
		t.Errorf("DIR's app.py changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("DIR holds %d entries, want only app.py", len(ents))
	}
	if !strings.Contains(errOut, "(a copy of "+dir+", which is unchanged)") {
		t.Errorf("run does not say where the result is:\n%s", errOut)
	}
	zr, err := zip.OpenReader(artifactsPath(t, errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == "app.py" {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "changed\n" {
				t.Errorf("the copy's app.py = %q", b)
			}
		}
	}
	assertNoSandboxes(t, instance)
}

// TestRunWorkspaceInPlace: run --in-place works in DIR itself; afterwards
// everything in DIR, what the agent made included, belongs to DIR's owner
// again, the symlink the agent planted was not followed (its target is
// untouched), and run names it.
func TestRunWorkspaceInPlace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--in-place needs root")
	}
	instance := sandboxEnv(t)
	useModel(t, editScript())
	const owner = 4321
	dir := userDir(t, owner)
	var passwd syscall.Stat_t
	syscall.Stat("/etc/passwd", &passwd)
	out, errOut, err := run(context.Background(), "run", "--workspace", dir, "--in-place", "Edit app.py")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "FROM-THE-USER") {
		t.Errorf("the first tool call did not see app.py:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.py")); string(b) != "changed\n" {
		t.Errorf("app.py = %q, want the job's change", b)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Uid != owner || st.Gid != owner {
			t.Errorf("%s is owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, owner, owner)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "leak")); target != "/etc/passwd" || err != nil {
		t.Errorf("leak = %q, %v; want the agent's symlink as it is", target, err)
	}
	var after syscall.Stat_t
	syscall.Stat("/etc/passwd", &after)
	if after.Uid != passwd.Uid || after.Gid != passwd.Gid {
		t.Errorf("/etc/passwd's owner changed to %d:%d through the agent's link", after.Uid, after.Gid)
	}
	for _, want := range []string{"workspace: " + dir + " (changed in place)", "leak -> /etc/passwd"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	assertNoSandboxes(t, instance)
}

// TestRunWorkspaceRefused: --in-place without --workspace, and a
// directory holding the data dir, are refused before anything runs.
func TestRunWorkspaceRefused(t *testing.T) {
	data := t.TempDir()
	t.Setenv("AGENTBOX_DATA_DIR", filepath.Join(data, "agentbox"))
	useModel(t, editScript())
	for _, args := range [][]string{
		{"run", "--in-place", "x"},
		{"run", "--workspace", data, "x"},
		{"run", "--workspace", filepath.Join(data, "nope"), "x"},
	} {
		if _, _, err := run(context.Background(), args...); err == nil {
			t.Errorf("agentbox %s: no error", strings.Join(args, " "))
		}
	}
}

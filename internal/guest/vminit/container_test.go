package vminit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFillIfEmpty: a missing or empty file gets the content; an image's
// own content, a link (never followed) and a directory are left alone.
func TestFillIfEmpty(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func(path string) error
		want  string // the file's content after; "" for not a file
	}{
		{"missing", func(string) error { return nil }, "filled\n"},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }, "filled\n"},
		{"the image's own", func(p string) error { return os.WriteFile(p, []byte("mine\n"), 0o644) }, "mine\n"},
		{"a link", func(p string) error { return os.Symlink(target, p) }, ""},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, filepath.Base(t.Name()))
			if err := tt.setup(p); err != nil {
				t.Fatal(err)
			}
			if err := fillIfEmpty(p, "filled\n"); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(target); len(b) != 0 {
				t.Fatalf("a link was followed: its target holds %q", b)
			}
			if tt.want == "" {
				return
			}
			if b, err := os.ReadFile(p); err != nil || string(b) != tt.want {
				t.Fatalf("content %q, %v; want %q", b, err, tt.want)
			}
		})
	}
}

package microvm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestContainerFiles: /etc/hosts and /etc/hostname are written into an
// image's tree where they are missing or empty; an image's own content,
// a link (never followed) and a directory are left alone, and an /etc
// that leads out of the tree is never written through.
func TestContainerFiles(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func(etc string) error
		want  string // /etc/hosts after; "" for not a file of ours
	}{
		{"missing", func(string) error { return nil }, "127.0.0.1\tlocalhost\n"},
		{"empty", func(etc string) error { return os.WriteFile(etc+"/hosts", nil, 0o644) }, "127.0.0.1\tlocalhost\n"},
		{"the image's own", func(etc string) error { return os.WriteFile(etc+"/hosts", []byte("mine\n"), 0o644) }, "mine\n"},
		{"a link", func(etc string) error { return os.Symlink(target, etc+"/hosts") }, ""},
		{"a directory", func(etc string) error { return os.Mkdir(etc+"/hosts", 0o755) }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree := t.TempDir()
			etc := filepath.Join(tree, "etc")
			if err := os.Mkdir(etc, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tt.setup(etc); err != nil {
				t.Fatal(err)
			}
			if err := containerFiles(tree); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(target); len(b) != 0 {
				t.Fatalf("a link was followed: its target holds %q", b)
			}
			if tt.want == "" {
				return
			}
			if b, err := os.ReadFile(etc + "/hosts"); err != nil || string(b[:min(len(b), len(tt.want))]) != tt.want {
				t.Fatalf("hosts %q, %v; want %q first", b, err, tt.want)
			}
			if b, err := os.ReadFile(etc + "/hostname"); err != nil || string(b) != "sandbox\n" {
				t.Fatalf("hostname %q, %v", b, err)
			}
		})
	}
	t.Run("an /etc leading out", func(t *testing.T) {
		tree := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(tree, "etc")); err != nil {
			t.Fatal(err)
		}
		if err := containerFiles(tree); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(outside, "hosts")); err == nil {
			t.Fatal("hosts written through a link out of the tree")
		}
	})
}

// TestPruneCache: a cached file unused for a day goes, with a build's
// temporary directory as old; the one in use, and recent ones, stay.
func TestPruneCache(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * cacheMaxAge)
	files := map[string]bool{ // name -> kept
		"initramfs-old.cpio": false, "initramfs-new.cpio": true, "initramfs-keep.cpio": true,
		"rootfs-old.ext4": true, // another pattern
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".rootfs-123", "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initramfs-old.cpio", "initramfs-keep.cpio", "rootfs-old.ext4", ".rootfs-123"} {
		os.Chtimes(filepath.Join(dir, name), old, old)
	}
	pruneCache(dir, "initramfs-*.cpio", filepath.Join(dir, "initramfs-keep.cpio"))
	for name, kept := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".rootfs-123")); err == nil {
		t.Error("a cut-short build's directory was kept")
	}
}

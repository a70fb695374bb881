package microvm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GuestModules are the modules the guest needs, where the kernel builds
// them as modules: the virtio transports (PCI and MMIO, for QEMU's
// microvm machine), the serial port, the block device of the root file
// system, virtio-fs for a shared workspace, and ext4.
var GuestModules = []string{"virtio_pci", "virtio_mmio", "virtio_console", "virtio_blk", "virtiofs", "ext4"}

// modName is how the kernel names a module: dashes read as underscores.
func modName(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(s), ".ko"), "-", "_")
}

// resolveModules returns the files (relative to modDir) of want and of
// everything they depend on, in an order they can be loaded. A wanted
// module built into the kernel (modules.builtin) is left out; one found
// nowhere is an error.
func resolveModules(modDir string, want []string) ([]string, error) {
	files, err := moduleFiles(modDir)
	if err != nil {
		return nil, err
	}
	builtin, _ := os.ReadFile(filepath.Join(modDir, "modules.builtin"))
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[modName(l)] = true
	}
	r := resolver{modDir: modDir, files: files, seen: map[string]bool{}}
	for _, name := range want {
		name = modName(name)
		if _, ok := files[name]; !ok && isBuiltin[name] {
			continue
		}
		if err := r.visit(name); err != nil {
			return nil, err
		}
	}
	return r.order, nil
}

// moduleFiles maps each module's name to its file beneath modDir.
func moduleFiles(modDir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(modDir, p)
			files[modName(p)] = rel
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	return files, nil
}

type resolver struct {
	modDir string
	files  map[string]string
	seen   map[string]bool
	order  []string
}

// visit appends name after its dependencies.
func (r *resolver) visit(name string) error {
	if r.seen[name] {
		return nil
	}
	r.seen[name] = true
	rel, ok := r.files[name]
	if !ok {
		return fmt.Errorf("kernel module %s: not found", name)
	}
	deps, err := moduleDepends(filepath.Join(r.modDir, rel))
	if err != nil {
		return err
	}
	for _, d := range deps {
		if err := r.visit(d); err != nil {
			return err
		}
	}
	r.order = append(r.order, rel)
	return nil
}

// moduleDepends reads the depends= entry of a module's .modinfo section.
func moduleDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kernel module: %w", err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("kernel module %s: no .modinfo", path)
	}
	info, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				deps = append(deps, modName(d))
			}
			return deps, nil
		}
	}
	return nil, nil
}

// Package microvm is the foundation of the microVM isolation tier: the
// assets a sandbox VM boots from (Debian's cloud kernel, an initramfs
// whose /init is the agentbox binary, an ext4 root file system made from
// the sandbox image) and the VM itself (QEMU, KVM where it runs guests and
// TCG otherwise), whose guest daemon answers over one virtio-serial port
// multiplexed by serialmux. The sandbox.Driver for the tier stands on it.
// docs/microvm.md records the choices and what they cost.
package microvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// KernelPackage is the Debian package whose dependency names the current
// cloud kernel: a small kernel for virtual machines, with virtio built as
// modules and no 9p.
const KernelPackage = "linux-image-cloud-amd64"

// DefaultCacheDir is where the assets are kept between runs.
const DefaultCacheDir = "/var/cache/agentbox/microvm"

// Kernel is a Linux kernel image and the modules built with it.
type Kernel struct {
	// Package is the versioned Debian package it came from.
	Package string
	// Release is its `uname -r`, e.g. "6.1.0-56-cloud-amd64".
	Release string
	// Image is the path of the bzImage; Modules of lib/modules/<Release>.
	Image, Modules string
}

// FetchKernel returns the kernel of KernelPackage's current version,
// downloading and unpacking it (apt-get download, dpkg-deb -x) into
// cacheDir/kernel the first time. Without the package lists (offline),
// the newest kernel already cached is used.
func FetchKernel(ctx context.Context, cacheDir string) (Kernel, error) {
	pkg, err := kernelPackage(ctx)
	if err != nil {
		if k, cerr := newestCached(cacheDir); cerr == nil {
			return k, nil
		}
		return Kernel{}, err
	}
	dir := filepath.Join(cacheDir, "kernel", pkg)
	if k, err := loadKernel(pkg, dir); err == nil {
		return k, nil
	}
	if err := unpackKernel(ctx, pkg, dir); err != nil {
		return Kernel{}, err
	}
	return loadKernel(pkg, dir)
}

var dependsRE = regexp.MustCompile(`(?m)^\s*Depends:\s*(linux-image-[0-9][^\s]*)$`)

// kernelPackage asks apt which versioned package KernelPackage depends on.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", KernelPackage).Output()
	if err != nil {
		return "", fmt.Errorf("kernel: apt-cache depends %s: %w", KernelPackage, err)
	}
	m := dependsRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("kernel: %s depends on no versioned kernel:\n%s", KernelPackage, out)
	}
	return string(m[1]), nil
}

// unpackKernel downloads pkg and unpacks it into dir, atomically.
func unpackKernel(ctx context.Context, pkg, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	dl := exec.CommandContext(ctx, "apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", pkg)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("kernel: apt-get download %s: %w\n%s", pkg, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("kernel: apt-get download %s left %d packages", pkg, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("kernel: dpkg-deb -x: %w\n%s", err, out)
	}
	if err := os.Rename(root, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("kernel cache: %w", err)
	}
	return nil
}

// loadKernel finds the kernel unpacked in dir.
func loadKernel(pkg, dir string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return Kernel{}, fmt.Errorf("kernel: %d images in %s", len(images), dir)
	}
	release := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	mods := filepath.Join(dir, "lib", "modules", release)
	if _, err := os.Stat(mods); err != nil {
		return Kernel{}, fmt.Errorf("kernel: modules: %w", err)
	}
	return Kernel{Package: pkg, Release: release, Image: images[0], Modules: mods}, nil
}

// newestCached returns the last (by name) kernel in the cache.
func newestCached(cacheDir string) (Kernel, error) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "kernel", "linux-image-*"))
	for i := len(dirs) - 1; i >= 0; i-- {
		if k, err := loadKernel(filepath.Base(dirs[i]), dirs[i]); err == nil {
			return k, nil
		}
	}
	return Kernel{}, errors.New("kernel: none cached")
}

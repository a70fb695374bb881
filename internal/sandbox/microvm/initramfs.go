package microvm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/guest/vminit"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// initramfsFile is one file of the initramfs: its path inside and the
// host file it copies.
type initramfsFile struct{ name, src string }

// BuildInitramfs returns an uncompressed initramfs (a newc archive) for k
// whose /init is guestBin, the static agentbox binary, with the modules of
// GuestModules and their dependencies (vminit's layout). It is written
// once to cacheDir, named by the hash of its content, so the same binary
// and kernel reuse it. Uncompressed, because under TCG decompressing it
// would cost more than reading it.
func BuildInitramfs(k Kernel, guestBin, cacheDir string) (string, error) {
	mods, err := resolveModules(k.Modules, GuestModules)
	if err != nil {
		return "", err
	}
	files := []initramfsFile{{"init", guestBin}}
	var names []string
	for _, m := range mods {
		names = append(names, path.Base(m))
		files = append(files, initramfsFile{strings.TrimPrefix(vminit.ModulesDir, "/") + "/" + path.Base(m), filepath.Join(k.Modules, m)})
	}
	list := []byte(strings.Join(names, "\n") + "\n")
	sum, err := contentHash(files, list)
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "initramfs-"+sum[:16]+".cpio")
	if _, err := os.Stat(out); err == nil {
		touch(out)
		return out, nil
	}
	defer pruneCache(cacheDir, "initramfs-*.cpio", out)
	if err := writeAtomic(out, func(w io.Writer) error { return writeInitramfs(w, files, list) }); err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	return out, nil
}

// contentHash hashes the names and contents of what goes in.
func contentHash(files []initramfsFile, list []byte) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "agentbox-initramfs/1\n%d\n%s", len(list), list)
	for _, f := range files {
		fmt.Fprintf(h, "%s\n", f.name)
		r, err := os.Open(f.src)
		if err != nil {
			return "", fmt.Errorf("initramfs: %w", err)
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("initramfs: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeInitramfs writes the archive: the directories vminit needs, /init,
// the modules and their load order.
func writeInitramfs(w io.Writer, files []initramfsFile, list []byte) error {
	c := &cpioWriter{w: w}
	for _, d := range []string{"dev", "proc", "sys", "newroot", "tmp", "run", "workspace", "lib", "lib/modules", "etc", "etc/agentbox"} {
		if err := c.dir(d); err != nil {
			return err
		}
	}
	for _, f := range files {
		mode := uint32(0o644)
		if f.name == "init" {
			mode = 0o755
		}
		if err := c.file(f.name, mode, f.src); err != nil {
			return err
		}
	}
	if err := c.bytes(strings.TrimPrefix(vminit.ModulesList, "/"), 0o644, list); err != nil {
		return err
	}
	return c.close()
}

// writeAtomic writes path through a temporary file in its directory,
// renamed into place once complete.
func writeAtomic(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

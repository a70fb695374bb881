package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// BuildRootfs returns an ext4 image of image's file system, made once per
// image ID in cacheDir: a container is created (not started) and
// exported, the export unpacked as root and made into the image with
// mkfs.ext4 -d, with a quarter more room than it holds, after the files
// a container's runtime would add (containerFiles). A changed image
// (a new ID) gets a new file; an unchanged one reuses it.
func BuildRootfs(ctx context.Context, image, cacheDir string) (string, error) {
	id, err := output(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", image)
	if err != nil {
		return "", fmt.Errorf("rootfs: %w: %w", sandbox.ErrImageMissing, err)
	}
	out := rootfsName(cacheDir, id)
	if _, err := os.Stat(out); err == nil {
		touch(out)
		return out, nil
	}
	defer pruneCache(cacheDir, "rootfs-*.ext4", out)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".rootfs-")
	if err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := exportImage(ctx, id, tree); err != nil {
		return "", err
	}
	if err := containerFiles(tree); err != nil {
		return "", err
	}
	img := filepath.Join(tmp, "rootfs.ext4")
	if err := makeExt4(ctx, tree, img); err != nil {
		return "", err
	}
	if err := os.Rename(img, out); err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	return out, nil
}

// exportImage unpacks the file system of a container of image id into dir.
func exportImage(ctx context.Context, id, dir string) error {
	cid, err := output(ctx, "docker", "create", "--label", "agentbox.rootfs-export=1", id, "true")
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	defer exec.Command("docker", "rm", "-f", cid).Run()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	export := exec.CommandContext(ctx, "docker", "export", cid)
	untar := exec.CommandContext(ctx, "tar", "-x", "-p", "--numeric-owner", "-C", dir)
	pipe, err := export.StdoutPipe()
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	untar.Stdin = pipe
	var eerr, terr capped.Buffer
	export.Stderr, untar.Stderr = &eerr, &terr
	if err := export.Start(); err != nil {
		return fmt.Errorf("rootfs: docker export: %w", err)
	}
	if err := untar.Run(); err != nil {
		_ = export.Wait()
		return fmt.Errorf("rootfs: tar: %w: %s", err, terr.String())
	}
	if err := export.Wait(); err != nil {
		return fmt.Errorf("rootfs: docker export: %w: %s", err, eerr.String())
	}
	return nil
}

// makeExt4 makes an ext4 image at img holding tree.
func makeExt4(ctx context.Context, tree, img string) error {
	var used int64
	err := filepath.WalkDir(tree, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil {
			used += info.Size() + 4096
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	size := used + used/4 + 256<<20
	if _, err := output(ctx, "mkfs.ext4", "-q", "-F", "-L", "agentbox-root", "-m", "0",
		"-d", tree, img, strconv.FormatInt(size>>10, 10)+"k"); err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	return nil
}

// output runs a command and returns its trimmed standard output.
func output(ctx context.Context, name string, args ...string) (string, error) {
	var stderr capped.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, args[0], err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// ImageEnv is the ENV of image, less the variables the guest reads
// itself (guest.ReadsEnv): what its commands' environment starts
// from, as in a container of it.
func ImageEnv(ctx context.Context, image string) ([]string, error) {
	out, err := output(ctx, "docker", "image", "inspect", "--format", "{{json .Config.Env}}", image)
	if err != nil {
		return nil, fmt.Errorf("image env: %w: %w", sandbox.ErrImageMissing, err)
	}
	var env []string
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		return nil, fmt.Errorf("image env: %w", err)
	}
	kept := env[:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !guest.ReadsEnv(k) {
			kept = append(kept, kv)
		}
	}
	return kept, nil
}

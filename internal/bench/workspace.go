package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// The cost of the sandbox boundary's protections on a workspace: writing a
// lot into it (under its disk quota) and zipping many files out of it
// (bounded, names made safe).

// writeScript writes 1 GiB into the workspace and flushes it to disk, so
// that the page cache does not hide what the write costs.
const writeScript = "dd if=/dev/zero of=/workspace/big bs=1M count=1024 conv=fdatasync status=none && rm /workspace/big"

func writeRow(ctx context.Context, o Options) (Row, error) {
	s, err := sandbox.Start(ctx, o.Driver, sandbox.Spec{}, sandbox.Binding{JobID: "bench", ManagedWorkspace: true})
	if err != nil {
		return Row{}, err
	}
	defer s.Destroy(ctx)
	n := max(o.Creates/2, 3)
	fmt.Fprintf(o.Log, "1 GiB written into the workspace: %d times each\n", n)
	ours, err := sample(n, func() error {
		req := guest.Shell(writeScript)
		req.TimeoutMS = 300_000
		res, err := s.Guest().Exec(ctx, req)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("dd: %s", res.Stderr)
		}
		return err
	})
	if err != nil {
		return Row{}, err
	}
	ref, cleanup, err := plainContainer(ctx, o, "")
	if err != nil {
		return Row{}, err
	}
	defer cleanup()
	base, err := sample(n, func() error { return run(ctx, o.Docker, "exec", ref, "sh", "-c", writeScript) })
	return Row{Name: "1 GiB written into the workspace (fdatasync)", Baseline: "docker exec … dd into a bind-mounted dir", Ours: ours, Base: base}, err
}

// plainContainer starts a container of the image with a host directory at
// /workspace (ws, or a new temp dir), as docker run would.
func plainContainer(ctx context.Context, o Options, ws string) (string, func(), error) {
	temp := ""
	if ws == "" {
		dir, err := os.MkdirTemp("", "abbench")
		if err != nil {
			return "", nil, err
		}
		os.Chmod(dir, 0o777)
		ws, temp = dir, dir
	}
	out, err := exec.CommandContext(ctx, o.Docker, o.runArgs("-d", "--rm", "--network", "none", "-v", ws+":/workspace", o.Image, "sleep", "3600")...).Output()
	if err != nil {
		os.RemoveAll(temp)
		return "", nil, fmt.Errorf("docker run: %w", err)
	}
	ref := strings.TrimSpace(string(out))
	return ref, func() {
		_ = run(context.WithoutCancel(ctx), o.Docker, "rm", "-f", ref)
		os.RemoveAll(temp)
	}, nil
}

// zipRow zips a workspace of 5,000 small files as the API's download does,
// against taking the same directory out of a container with docker cp.
func zipRow(ctx context.Context, o Options) (Row, error) {
	dir, err := os.MkdirTemp("", "abzip")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	if err := fillFiles(dir, 5000); err != nil {
		return Row{}, err
	}
	n := max(o.Creates, 5)
	fmt.Fprintf(o.Log, "zip of a 5,000-file workspace: %d times each\n", n)
	ours, err := sample(n, func() error {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return err
		}
		defer root.Close()
		return artifact.WriteZip(io.Discard, root, nil)
	})
	if err != nil {
		return Row{}, err
	}
	ref, cleanup, err := plainContainer(ctx, o, dir)
	if err != nil {
		return Row{}, err
	}
	defer cleanup()
	base, err := sample(n, func() error {
		cmd := exec.CommandContext(ctx, o.Docker, "cp", ref+":/workspace", "-")
		cmd.Stdout = io.Discard
		return cmd.Run()
	})
	return Row{Name: "zip of a 5,000-file workspace", Baseline: "docker cp CONTAINER:/workspace - (a tar)", Ours: ours, Base: base}, err
}

// fillFiles writes n files of 1 KiB of text in 50 directories.
func fillFiles(dir string, n int) error {
	line := strings.Repeat("print('agentbox bench')\n", 43)[:1024]
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%50))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.py", i)), []byte(line), 0o644); err != nil {
			return err
		}
	}
	return nil
}

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DownloadArtifacts writes the ended job's workspace, as a zip, to w and
// returns the bytes written. A stream the server cut short is an error.
func (c *Client) DownloadArtifacts(ctx context.Context, id string, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/artifacts.zip", w)
}

// GetFile writes one file of the ended job's workspace to w; path is
// relative to the workspace ("src/main.py").
func (c *Client) GetFile(ctx context.Context, id, path string, w io.Writer) (int64, error) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.download(ctx, jobPath(id)+"/files/"+strings.Join(segs, "/"), w)
}

// Download writes the ended job's workspace as a zip to w, or with file
// set that one file of it, and returns the bytes written.
func (c *Client) Download(ctx context.Context, id, file string, w io.Writer) (int64, error) {
	if file != "" {
		return c.GetFile(ctx, id, file, w)
	}
	return c.DownloadArtifacts(ctx, id, w)
}

func (c *Client) download(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := c.do(ctx, "GET", path, nil, nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return n, context.Cause(ctx)
		}
		return n, fmt.Errorf("download %s (after %d bytes): %w", path, n, err)
	}
	return n, nil
}

// WriteFile saves a download as the file name: write writes it into a
// temporary file beside name, renamed into place once complete, so a
// failed download leaves nothing behind. Without force a file that
// appeared at name meanwhile is kept and the download is an error.
func WriteFile(name string, force bool, write func(io.Writer) (int64, error)) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".agentbox-download-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	n, err := write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return n, err
	}
	if force {
		return n, os.Rename(tmp.Name(), name)
	}
	if err := os.Link(tmp.Name(), name); errors.Is(err, os.ErrExist) {
		return n, fmt.Errorf("%s appeared meanwhile; not overwriting it", name)
	} else if err != nil {
		return n, os.Rename(tmp.Name(), name) // a file system without hard links
	}
	return n, nil
}

// Diff writes what the ended job changed, as a unified diff (format ""
// or "diff") or as git format-patch output ("patch", repository jobs),
// to w and returns the bytes written.
func (c *Client) Diff(ctx context.Context, id, format string, w io.Writer) (int64, error) {
	p := jobPath(id) + "/diff"
	if format != "" {
		p += "?format=" + url.QueryEscape(format)
	}
	return c.download(ctx, p, w)
}

// DiffAll is Diff (format diff) with what the server leaves out by
// default: the files the workspace's .gitignore ignores and the caches
// (__pycache__, node_modules, ...).
func (c *Client) DiffAll(ctx context.Context, id string, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/diff?all=1", w)
}

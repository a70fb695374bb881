package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

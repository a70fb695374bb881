package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"sync"

	"github.com/agentbox/agentbox/internal/tarpack"
	"github.com/agentbox/agentbox/internal/wire"
)

// errAnswered ends the writing of a request body the server answered
// before reading it all.
var errAnswered = errors.New("the server answered before the upload ended")

// SubmitWorkspace submits a job that starts from a workspace: archive is a
// zip or a tar.gz (the server tells them apart), streamed to the server as
// it is read, as the workspace part of a multipart body, never held in
// memory. An error reading archive is returned as it is.
func (c *Client) SubmitWorkspace(ctx context.Context, req wire.SubmitRequest, idempotencyKey string, archive io.Reader) (wire.SubmitResponse, error) {
	job, err := json.Marshal(req)
	if err != nil {
		return wire.SubmitResponse{}, err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() {
		werr = writeSubmission(mw, job, archive)
		pw.CloseWithError(werr)
	})
	resp, err := c.send(ctx, "POST", "/v1/jobs", pr, mw.FormDataContentType(), keyHeader(idempotencyKey), http.StatusCreated)
	pr.CloseWithError(errAnswered) // a writer still writing stops
	wg.Wait()
	if err != nil {
		if werr != nil && !errors.Is(werr, errAnswered) && ctx.Err() == nil {
			var se *Error
			if !errors.As(err, &se) { // the server's answer says more than a broken upload
				return wire.SubmitResponse{}, werr
			}
		}
		return wire.SubmitResponse{}, err
	}
	defer resp.Body.Close()
	var out wire.SubmitResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("decode answer of POST /v1/jobs: %w", err)
	}
	return out, nil
}

// SubmitDir submits a job that starts from the tree under root, packed as
// a tar.gz (tarpack.Pack, with opts) as it is sent. Run tarpack.Survey
// first to have what Pack refuses said before anything is sent.
func (c *Client) SubmitDir(ctx context.Context, req wire.SubmitRequest, idempotencyKey string, root *os.Root, opts tarpack.PackOptions) (wire.SubmitResponse, error) {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(tarpack.Pack(ctx, pw, root, opts)) })
	sr, err := c.SubmitWorkspace(ctx, req, idempotencyKey, pr)
	pr.CloseWithError(errAnswered) // a packer still packing stops
	wg.Wait()
	return sr, err
}

// writeSubmission writes the job part, then the workspace part, and closes
// the multipart body.
func writeSubmission(mw *multipart.Writer, job []byte, archive io.Reader) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="job"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err == nil {
		_, err = w.Write(job)
	}
	if err != nil {
		return err
	}
	if w, err = mw.CreateFormFile("workspace", "workspace"); err != nil {
		return err
	}
	if _, err := io.Copy(w, archive); err != nil {
		return err
	}
	return mw.Close()
}

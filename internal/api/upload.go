package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// uploadSlack is what a multipart submission may hold beyond its job part
// and MaxUploadBytes of archive: part headers, and the tar headers and
// zip directory of many small files.
const uploadSlack = 64 << 20

// Part names of a multipart submission.
const (
	partJob       = "job"
	partWorkspace = "workspace"
)

func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// submitMultipart handles a multipart submission: a "job" part holding the
// JSON of a JSON submission, and a "workspace" part holding a zip or a
// tar.gz, in either order. The workspace is unpacked before the job is
// submitted, and removed if it is not.
func (s *server) submitMultipart(w http.ResponseWriter, r *http.Request) (store.Job, bool, error) {
	up, ok := s.svc.(Uploads)
	if !ok {
		return store.Job{}, false, badRequest("this server takes no uploads; send the job as JSON")
	}
	limit := s.cfg.MaxUploadBytes + s.cfg.MaxBodyBytes + uploadSlack
	if r.ContentLength > limit {
		return store.Job{}, false, &http.MaxBytesError{Limit: limit}
	}
	asUpload(r, s.cfg.MinUploadRate)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		return store.Job{}, false, badRequest("multipart body: %v", err)
	}
	m := &multipartSubmit{s: s, up: up, ctx: r.Context(), key: idempotencyKey(r)}
	defer m.discard()
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return store.Job{}, false, partError(err)
		}
		err = m.part(p)
		p.Close()
		if err != nil {
			return store.Job{}, false, err
		}
	}
	return m.submit()
}

// partError is the error of a multipart body that cannot be read.
func partError(err error) error {
	if bodyFailure(err) {
		return err
	}
	return badRequest("multipart body: %v", err)
}

// multipartSubmit is a multipart submission as its parts come.
type multipartSubmit struct {
	s      *server
	up     Uploads
	ctx    context.Context
	key    string
	req    *jobs.SubmitRequest // nil until the job part
	staged *jobs.Staged        // nil until the workspace part, or once submitted
}

// part takes one part of the body.
func (m *multipartSubmit) part(p *multipart.Part) error {
	switch p.FormName() {
	case partJob:
		return m.job(p)
	case partWorkspace:
		return m.workspace(p)
	}
	return badRequest("multipart body: unknown part %q; want %q (the job's JSON) and %q (a zip or tar.gz)", p.FormName(), partJob, partWorkspace)
}

// job decodes the job part and checks the job, before any upload is read.
func (m *multipartSubmit) job(p *multipart.Part) error {
	if m.req != nil {
		return badRequest("multipart body: two %q parts", partJob)
	}
	max := m.s.cfg.MaxBodyBytes
	body, err := io.ReadAll(io.LimitReader(p, max+1))
	if err != nil {
		return partError(err)
	}
	if int64(len(body)) > max {
		return &http.MaxBytesError{Limit: max}
	}
	var in wire.SubmitRequest
	if err := decodeBody(body, &in); err != nil {
		return err
	}
	req := submitRequest(in, m.key)
	if err := m.up.Check(req, m.staged != nil); err != nil {
		return err
	}
	if nc, ok := m.s.svc.(networkChecker); ok {
		if _, err := nc.CheckNetwork(req.Network); err != nil {
			return err // before the upload is read, as the other fields
		}
	}
	m.req = &req
	return nil
}

// workspace unpacks the workspace part.
func (m *multipartSubmit) workspace(p *multipart.Part) error {
	if m.staged != nil {
		return badRequest("multipart body: two %q parts", partWorkspace)
	}
	if m.req != nil {
		if err := m.up.Check(*m.req, true); err != nil {
			return err
		}
	}
	br := bufio.NewReaderSize(p, 64<<10)
	f, err := archiveFormat(br)
	if err != nil {
		return err
	}
	m.staged, err = m.up.Stage(m.ctx, jobs.Upload{R: br, Format: f})
	if errors.Is(err, io.ErrUnexpectedEOF) { // the client's doing, not the server's
		return badRequest("the request body ended before the upload did: %v", err)
	}
	return err
}

// archiveFormat tells a zip from a tar.gz by its first bytes; the part's
// file name and type may say anything.
func archiveFormat(br *bufio.Reader) (workspace.Format, error) {
	head, err := br.Peek(4)
	switch {
	case bodyFailure(err):
		return "", err
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return workspace.FormatZip, nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return workspace.FormatTarGz, nil
	case len(head) == 0:
		return "", badRequest("the %q part is empty; send a zip or a tar.gz", partWorkspace)
	}
	return "", badRequest("the %q part is neither a zip nor a tar.gz (judged by its first bytes)", partWorkspace)
}

// submit submits the job with its workspace, once every part is in.
func (m *multipartSubmit) submit() (store.Job, bool, error) {
	if m.req == nil {
		return store.Job{}, false, badRequest("multipart body: no %q part; it holds the job's JSON, as a JSON submission's body", partJob)
	}
	req := *m.req
	req.Staged, m.staged = m.staged, nil // Submit removes it if it makes no job on it
	return m.s.svc.Submit(m.ctx, req)
}

// discard removes a workspace unpacked for a job that was not submitted.
func (m *multipartSubmit) discard() {
	if m.staged != nil {
		_ = m.up.Discard(context.WithoutCancel(m.ctx), m.staged)
	}
}

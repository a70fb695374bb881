package api

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
)

// Media opens the images kept of a job's tool results (see jobs.Media):
// an optional ability of a Service, without which every image is 404.
type Media interface {
	Media(ctx context.Context, id, name string) (*os.File, string, error)
}

var _ Media = (*jobs.Service)(nil)

// mediaKey is job id's media key, which the UI's image URLs carry (see
// imageSession): a capability to load the job's images with a session,
// no secret beyond them, so it may sit in a URL.
func (s *server) mediaKey(id string) string {
	return enc(string(s.view.mac("media|" + id)))[:22]
}

// media handles GET /v1/jobs/{id}/media/{name}: an image a tool result of
// the job carried (a screenshot), named in its tool_result event. The
// image was made in the sandbox, so it is served as what its first bytes
// say (PNG or JPEG, checked when it was kept), never sniffed, and under a
// CSP that would run nothing even if it were opened as a page.
func (s *server) media(w http.ResponseWriter, r *http.Request) error {
	m, ok := s.svc.(Media)
	if !ok {
		return jobs.ErrNoMedia
	}
	f, kind, err := m.Media(r.Context(), pathID(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", kind)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "private, no-cache") // revalidated: gone once the job's data is deleted
	var mod time.Time
	if info, err := f.Stat(); err == nil {
		mod = info.ModTime()
	}
	http.ServeContent(w, r, "", mod, f)
	return nil
}

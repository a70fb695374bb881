package api

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox/agentbox/internal/wire"
)

// Per-job view origins. By default a job's desktop and Jupyter are served
// on the API's own origin, under /v1/jobs/{id}/, so a page one sandbox
// serves shares an origin with every other job's views. With
// Config.ViewURL, e.g. "https://{job}.view.example.com", each job's views
// get an origin of their own (job-<hex>.view.example.com, same paths): the
// browser's same-origin policy then keeps a sandbox's pages from reading
// another job's views or the API, and its cookies are host-only. A wildcard
// DNS name and certificate point every such host at the API.

// JobPlaceholder stands for a job's host label in a view URL template.
const JobPlaceholder = "{job}"

// viewHosts is a parsed view URL template.
type viewHosts struct {
	scheme string // "http" or "https"
	suffix string // ".view.example.com", lower case
	port   string // ":8443", or empty
}

// CheckViewURL reports what is wrong with a view URL template, if anything.
func CheckViewURL(template string) error {
	_, err := parseViewURL(template)
	return err
}

// parseViewURL parses "http(s)://{job}.domain[:port]"; empty gives nil.
func parseViewURL(template string) (*viewHosts, error) {
	if template == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("view URL %q: %s; want http(s)://%s.DOMAIN[:PORT], e.g. https://%s.view.example.com", template, why, JobPlaceholder, JobPlaceholder)
	}
	scheme, rest, ok := strings.Cut(template, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return nil, bad("the scheme must be http or https")
	}
	if !strings.HasPrefix(rest, JobPlaceholder+".") || strings.Count(template, JobPlaceholder) != 1 {
		return nil, bad("the host must start with " + JobPlaceholder + ".")
	}
	u, err := url.Parse(scheme + "://x" + strings.TrimPrefix(rest, JobPlaceholder))
	if err != nil {
		return nil, bad(err.Error())
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, bad("it must not have a path, query or user")
	}
	suffix := strings.ToLower(strings.TrimPrefix(u.Hostname(), "x"))
	if len(suffix) < 2 || net.ParseIP(suffix[1:]) != nil {
		return nil, bad("the host needs a domain after " + JobPlaceholder)
	}
	v := &viewHosts{scheme: scheme, suffix: suffix}
	if p := u.Port(); p != "" {
		v.port = ":" + p
	}
	return v, nil
}

// label is a job's host label: job IDs are "job_" and hex digits, and "_"
// has no place in a host name.
func viewLabel(id string) string { return strings.ToLower(strings.ReplaceAll(id, "_", "-")) }

// origin is the job's view origin, e.g. "https://job-1a2b.view.example.com".
func (v *viewHosts) origin(id string) string {
	return v.scheme + "://" + viewLabel(id) + v.suffix + v.port
}

// uiOrigin is the web UI's origin, which may frame the views when they
// have origins of their own: the base URL's, else the view domain's
// without the job's label (http://localhost:8080 for
// http://{job}.localhost:8080); "" without per-job view origins.
func (s *server) uiOrigin() string {
	switch {
	case s.views == nil:
		return ""
	case s.cfg.BaseURL != "":
		if u, err := url.Parse(s.cfg.BaseURL); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	return s.views.scheme + "://" + strings.TrimPrefix(s.views.suffix, ".") + s.views.port
}

// OnViewDomain reports whether host (host[:port]) is under the view URL
// template's domain, where the API itself is not served.
func OnViewDomain(template, host string) bool {
	v, err := parseViewURL(template)
	_, isView := v.jobOf(host)
	return err == nil && isView
}

// LocalViewURL reports whether the template's view hosts are loopback
// names (*.localhost), which a server without auth requires.
func LocalViewURL(template string) bool {
	v, err := parseViewURL(template)
	return err == nil && v != nil && strings.HasSuffix(v.suffix, ".localhost")
}

// jobOf reports whether host (a Host header) is a view host, and whose:
// id is empty for a host under the view domain that names no job.
func (v *viewHosts) jobOf(host string) (id string, isView bool) {
	if v == nil {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, v.suffix)
	if !ok {
		return "", false
	}
	hex, ok := strings.CutPrefix(label, "job-")
	if !ok || hex == "" || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", true
	}
	return "job_" + hex, true
}

// viewHostOf reports whether r came to job id's own view host.
func (s *server) viewHostOf(r *http.Request, id string) bool {
	got, ok := s.views.jobOf(r.Host)
	return ok && got == id
}

// confineViewHost answers a request to a view host that is not for that
// job's desktop or Jupyter (the API, another job's views) with 404, and
// reports whether it did.
func (s *server) confineViewHost(w http.ResponseWriter, r *http.Request) bool {
	id, ok := s.views.jobOf(r.Host)
	if !ok {
		return false
	}
	if id != "" {
		// The escaped path's segments, as the mux routes them: a decoded
		// path would take /v1/jobs/job_x%2Fdesktop for the views.
		seg := strings.SplitN(r.URL.EscapedPath(), "/", 6)
		if len(seg) >= 5 && seg[0] == "" && seg[1] == "v1" && seg[2] == "jobs" && seg[3] == id &&
			(seg[4] == "desktop" || seg[4] == "jupyter") {
			return false
		}
		if r.URL.Path == "/" && r.Method == http.MethodGet {
			http.Redirect(w, r, "/v1/jobs/"+id+"/desktop/", http.StatusFound)
			return true
		}
	}
	msg := "this host names no job"
	if id != "" {
		msg = fmt.Sprintf("this host serves job %s's desktop and Jupyter only, under /v1/jobs/%s/desktop/ and /jupyter/", id, id)
	}
	writeError(w, http.StatusNotFound, wire.CodeNotFound, msg)
	return true
}

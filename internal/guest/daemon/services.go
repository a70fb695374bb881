package daemon

import (
	"net/http"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/desktop"
	"github.com/agentbox/agentbox/internal/guest/daemon/jupyter"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// The sandbox's graphical and Jupyter stack: one supervisor runs the
// desktop's programs and the notebook server, on demand; the routes of the
// desktop and the kernel decode, call them, and encode.

// newSupervisor returns the supervisor of the desktop's programs (the
// group guest.ServiceDesktop) and Jupyter's notebook server
// (guest.ServiceJupyter); nothing runs yet.
func (s *Server) newSupervisor() *supervise.Supervisor {
	desk := desktop.Services(s.cfg.DisplayWidth, s.cfg.DisplayHeight)
	parts := make([]string, len(desk))
	for i, spec := range desk {
		parts[i] = spec.Name
	}
	cfg := supervise.Config{
		Log:          s.log,
		Environ:      func() ([]string, error) { return s.env(nil) },
		Dir:          s.cfg.Workspace,
		Groups:       map[string][]string{guest.ServiceDesktop: parts},
		ReadyTimeout: s.cfg.ServiceTimeout,
	}
	return supervise.New(cfg, append(desk, jupyter.Service(s.cfg.Workspace, s.cfg.WebBase))...)
}

// defaultTargets are where the proxy sends each web service's requests.
func (s *Server) defaultTargets() map[string]proxyTarget {
	return map[string]proxyTarget{
		guest.ServiceDesktop: {addr: desktop.NoVNCAddr, prefix: "/"},
		guest.ServiceJupyter: {addr: jupyter.Addr, prefix: jupyter.BasePath(s.cfg.WebBase)},
	}
}

func (s *Server) desktopStart(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		var empty struct{}
		if err := decode(w, r, &empty); err != nil {
			s.writeError(w, err)
			return
		}
	}
	info, err := s.desktop.Start(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) desktopAction(w http.ResponseWriter, r *http.Request) {
	var a guest.DesktopAction
	if err := decode(w, r, &a); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.desktop.Act(r.Context(), a)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) kernelExecute(w http.ResponseWriter, r *http.Request) {
	var req guest.KernelRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.kernel.Execute(r.Context(), req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

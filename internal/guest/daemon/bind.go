package daemon

import (
	"maps"
	"net/http"
	"regexp"

	"github.com/agentbox/agentbox/internal/guest"
)

// webBaseRE is a clean absolute URL path, as sandbox.CheckWebBase wants.
var webBaseRE = regexp.MustCompile(`^(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$`)

// bind serves POST /bind: a sandbox made before its job gets the job's
// environment and web base. Nothing of the desktop or Jupyter runs yet
// (they start on demand), so the supervisor, the kernel's client and the
// proxy's targets are made again under the new web base. A second bind,
// or one to a guest bound at create (Config.Bound, or a web base on its
// command line), is refused: the socket is open to every process in the
// sandbox, which must not plant an environment for the host's later
// commands or a web base for the user's pages.
func (s *Server) bind(w http.ResponseWriter, r *http.Request) {
	var req guest.BindRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.WebBase != "" && !webBaseRE.MatchString(req.WebBase) {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "bind: web base %q is not a clean absolute URL path", req.WebBase))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound || s.cfg.Bound || s.cfg.WebBase != "" {
		s.writeError(w, guest.Errorf(guest.CodeExists, "bind: the guest is bound already"))
		return
	}
	s.bound = true
	env := maps.Clone(s.cfg.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	s.cfg.Env, s.cfg.WebBase = env, req.WebBase
	s.targets = s.defaultTargets()
	s.sup = s.newSupervisor()
	s.desktop, s.kernel = s.newDesktop(), s.newKernel()
	writeJSON(w, http.StatusOK, struct{}{})
}

package guest

// STUB — replaced by the desktop implementation.

import "net/http"

func (s *Server) desktopStart(w http.ResponseWriter, _ *http.Request) {
	s.writeError(w, errorf(CodeService, "desktop: not implemented"))
}

func (s *Server) desktopAction(w http.ResponseWriter, _ *http.Request) {
	s.writeError(w, errorf(CodeService, "desktop: not implemented"))
}

package guest

// STUB — replaced by the proxy implementation.

import "net/http"

func (s *Server) proxy(w http.ResponseWriter, _ *http.Request) {
	s.writeError(w, errorf(CodeService, "proxy: not implemented"))
}

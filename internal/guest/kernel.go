package guest

// STUB — replaced by the kernel implementation.

import "net/http"

func (s *Server) kernelExecute(w http.ResponseWriter, _ *http.Request) {
	s.writeError(w, errorf(CodeService, "kernel: not implemented"))
}

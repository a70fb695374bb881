package guest

// STUB — replaced by the supervisor implementation.

import "context"

func (s *Server) ensure(ctx context.Context, service string) error {
	return errorf(CodeService, "%s: not implemented", service)
}

// jupyterURL is the notebook server's URL inside the sandbox, base URL included.
func (s *Server) jupyterURL() string { return "http://127.0.0.1:8888" + s.cfg.WebBase + "/jupyter/" }

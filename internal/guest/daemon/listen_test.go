package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

// TestSecretNeverReachesAService: the secret is taken off a request before
// any route sees it, so the proxy cannot hand it to Jupyter or noVNC.
func TestSecretNeverReachesAService(t *testing.T) {
	var seen []string
	h := requireSecret("s3cret-s3cret-s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get(guest.SecretHeader))
	}))
	for secret, want := range map[string]int{"s3cret-s3cret-s3cret": http.StatusOK, "": http.StatusUnauthorized, "s3cret": http.StatusUnauthorized} {
		r := httptest.NewRequest(http.MethodGet, "/proxy/jupyter/api", nil)
		if secret != "" {
			r.Header.Set(guest.SecretHeader, secret)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("secret %q: status %d, want %d", secret, w.Code, want)
		}
	}
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("handler saw %q, want one request without the secret header", seen)
	}
}

package wiring

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/lockfile"
)

// CheckViewURL refuses a view URL the server could not serve safely: one
// that is not a template of one label per job, one off loopback names
// without auth, or one whose domain holds the public URL's host.
func CheckViewURL(s config.Server) error {
	if err := api.CheckViewURL(s.ViewURL); err != nil {
		return err
	}
	if s.ViewURL == "" {
		return nil
	}
	if s.NoAuth && !api.LocalViewURL(s.ViewURL) {
		return fmt.Errorf("view URL %q: without auth, views are served on loopback names only, such as http://{job}.localhost:8080", s.ViewURL)
	}
	if u, err := url.Parse(s.PublicURL); s.PublicURL != "" && err == nil && api.OnViewDomain(s.ViewURL, u.Host) {
		return fmt.Errorf("view URL %q: the public URL %s is under the views' domain; the API needs a host outside it", s.ViewURL, s.PublicURL)
	}
	return nil
}

// lockDataDir makes sure one server at a time uses a data dir: the worker ID
// is derived from it, and two servers with one ID would take each other's jobs.
func lockDataDir(dir string) (func(), error) {
	return lockfile.Lock(dir, "serve.lock", "another agentbox serve (pid %s) is using the data dir %s; stop it or use another --data-dir")
}

// serverTokens decides the tokens the API accepts, generating one on first
// start when none is configured.
func serverTokens(cfg config.Config, log *slog.Logger) ([]string, error) {
	s := cfg.Server
	if s.NoAuth {
		if !config.IsLoopback(s.Addr) {
			return nil, fmt.Errorf("--no-auth is refused on %s: only loopback addresses may run without a token", s.Addr)
		}
		log.Warn("auth is off: anyone who can reach " + s.Addr + " can run jobs")
		return nil, nil
	}
	tokens, err := configuredTokens(s)
	if err != nil || len(tokens) > 0 {
		return tokens, err
	}
	tok, path, created, err := api.LoadOrCreateToken(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("generated an API token", "path", path)
	} else {
		log.Info("using the API token", "path", path)
	}
	return []string{tok}, nil
}

// configuredTokens are the tokens given in the environment or a file.
func configuredTokens(s config.Server) ([]string, error) {
	var tokens []string
	if s.Token != "" {
		tokens = append(tokens, s.Token)
	}
	if s.TokenFile != "" {
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return nil, fmt.Errorf("token file %s is empty", s.TokenFile)
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

// viewerKey loads the key that signs viewer links and cookies: the
// configured file, which must exist, or <data dir>/viewer.key, generated on
// first start. A key kept on disk lets viewer cookies outlive a restart.
func viewerKey(cfg config.Config, log *slog.Logger) ([]byte, error) {
	path := cfg.Server.ViewerKeyFile
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("viewer key file: %w (make one with: head -c 32 /dev/urandom | base64 > %s; chmod 600 %s)", err, path, path)
		}
	} else {
		path = filepath.Join(cfg.DataDir, api.ViewerKeyFile)
	}
	key, created, err := api.LoadOrCreateSecret(path)
	if err != nil {
		return nil, fmt.Errorf("viewer key: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("viewer key %s: %d characters, want at least 32 of random text (head -c 32 /dev/urandom | base64)", path, len(key))
	}
	if created {
		log.Info("generated the viewer signing key", "path", path)
	}
	return []byte(key), nil
}

// Connect connects a client command to the server url names, else cfg's
// (AGENTBOX_URL), with token (--token), else cfg's (AGENTBOX_TOKEN),
// else a local server's token file: cfg's AGENTBOX_TOKEN_FILE unless
// dataDirGiven (--data-dir), else the one in cfg's data directory.
func Connect(cfg config.Config, dataDirGiven bool, url, token string) (*client.Client, error) {
	tok := client.Token{Value: token, From: "--token"}
	if tok.Value == "" {
		tok = client.Token{Value: cfg.Client.Token, From: "AGENTBOX_TOKEN"}
	}
	file := filepath.Join(cfg.DataDir, api.TokenFile)
	if cfg.Server.TokenFile != "" && !dataDirGiven {
		file = cfg.Server.TokenFile
	}
	return client.Connect(cmp.Or(url, cfg.Client.URL), tok, file)
}

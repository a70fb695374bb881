// Package config owns agentbox's typed configuration: defaults, the
// environment variables that override them, and validation. It is the only
// package that reads the environment; everything else receives a sub-struct.
//
// Each setting is named once, in Settings (settings.go): its variable, the
// flag that overrides it, its default, its parser and its help. FromEnv
// reads by it, Default applies its defaults, and the flags' help and
// docs/configuration.md's table (SettingsTable, go run ./gendoc) are made
// from it. Settings that other packages parse (the git hosts, the egress
// files) are kept as text, read where they are used (wiring.CheckConfig
// checks them at start). config imports no agentbox package but the
// leaves units and imagename, so that anything may import it.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultImage is the sandbox image built by `agentbox image build`.
const DefaultImage = "agentbox-sandbox:latest"

// Config is everything agentbox is configured with.
type Config struct {
	// DataDir holds everything agentbox keeps: workspaces, sandbox state, the store.
	DataDir string
	// Store is where `agentbox serve` keeps jobs and their events
	// (AGENTBOX_STORE, --store): "" or "sqlite" for agentbox.db in the data
	// dir, a postgres:// or postgresql:// URL for a PostgreSQL database
	// that several servers may share.
	Store string
	// Role is what `agentbox serve` runs (AGENTBOX_ROLE, --role): RoleAll
	// (default), RoleAPI or RoleWorker. See Cluster.
	Role string
	// Blobs is where workspace checkpoints and final artifacts go
	// (AGENTBOX_BLOBS, --blobs); see BlobsKind.
	Blobs   string
	Cluster Cluster
	Docker  Docker
	Sandbox Sandbox
	Model   Model
	Server  Server
	Client  Client
	Agent   Agent
	Git     Git
	Egress  Egress
}

// Agent configures how jobs are worked on.
type Agent struct {
	// Kind is "model" (a language model drives the tools) or "shell" (the
	// task is run as a bash script; for scripting and tests). AGENTBOX_AGENT.
	Kind string
	// MaxSteps applies to jobs that set none (AGENTBOX_MAX_STEPS).
	MaxSteps int
	// MaxTokens and MaxCostUSD are per-job budgets, 0 for none
	// (AGENTBOX_MAX_TOKENS, AGENTBOX_MAX_COST).
	MaxTokens  int64
	MaxCostUSD float64
	// ContextWindow overrides the model's context window in tokens, 0 for
	// the model's own (AGENTBOX_CONTEXT_WINDOW); a job's limits override it.
	ContextWindow int
}

// Server configures `agentbox serve`.
type Server struct {
	// Addr is the listen address (AGENTBOX_ADDR).
	Addr string
	// Token is accepted by the API (AGENTBOX_TOKEN); TokenFile names a file
	// holding one (AGENTBOX_TOKEN_FILE). Without either, serve generates one
	// in the data dir.
	Token     string
	TokenFile string
	// ViewerKeyFile holds the key that signs viewer links and cookies
	// (AGENTBOX_VIEWER_KEY_FILE): at least 32 bytes, mode 0600. Default
	// <data dir>/viewer.key, generated on first start, so viewer cookies
	// survive a restart; replicas behind one address share one file.
	ViewerKeyFile string
	// NoAuth turns auth off; allowed on loopback addresses only.
	NoAuth bool
	// Concurrency is how many jobs run at once (AGENTBOX_CONCURRENCY).
	Concurrency int
	// Lease is how long a claim lasts without a heartbeat (AGENTBOX_LEASE).
	Lease time.Duration
	// JobTimeout is the default wall-clock limit of a job (AGENTBOX_JOB_TIMEOUT).
	JobTimeout time.Duration
	// MaxAttempts bounds how often a job is run after its worker died.
	MaxAttempts int
	// Grace is how long running jobs may finish on SIGTERM (AGENTBOX_GRACE).
	Grace time.Duration
	// PublicURL is where clients reach the server, e.g. behind a
	// TLS-terminating proxy (AGENTBOX_PUBLIC_URL): links in answers and
	// viewer links are made absolute with it, and an https URL makes the
	// viewer cookie Secure.
	PublicURL string
	// Retention is how long the workspace and zip of an ended job are kept
	// before they are removed (AGENTBOX_RETENTION, default 7 days; 0 keeps
	// them for ever). The job's record and log stay.
	Retention time.Duration
	// MaxUpload is how many bytes an uploaded workspace (a zip or a
	// tar.gz) may unpack to (AGENTBOX_MAX_UPLOAD, default 1 GiB; 0 is the
	// default too); a larger one is refused with 413.
	MaxUpload int64
	// LiveOutputMax caps the bytes of a job's commands' output stored as
	// output events while they run (AGENTBOX_LIVE_OUTPUT_MAX, default 8 MiB);
	// past it, each step's result still carries its output.
	LiveOutputMax int64
	// ViewURL gives each job's desktop and Jupyter views an origin of
	// their own (AGENTBOX_VIEW_URL): a template such as
	// https://{job}.view.example.com, under a wildcard DNS name and
	// certificate that reach this server. Empty: the views are served on
	// the API's origin.
	ViewURL string
	// HTTP bounds the connections and requests of clients.
	HTTP HTTP
}

// Client configures the CLI's connection to a server.
type Client struct {
	URL   string // AGENTBOX_URL
	Token string // AGENTBOX_TOKEN
}

// Docker says how to reach the container engine.
type Docker struct {
	// Host is the engine address (DOCKER_HOST), empty for the platform default.
	// A Podman socket works here too: unix:///run/podman/podman.sock.
	Host string
}

// Isolations are the isolation tiers AGENTBOX_ISOLATION may name (the
// sandbox package's, which config does not import).
var Isolations = []string{"container", "gvisor", "microvm"}

// Sandbox holds the defaults every sandbox is created with.
type Sandbox struct {
	// Driver names the sandbox driver (AGENTBOX_DRIVER, default "docker").
	Driver string
	// GuestTransport is how the host reaches the guest in each new sandbox
	// (AGENTBOX_GUEST_TRANSPORT): "unix" (default) or "tcp"; the driver
	// says which it supports.
	GuestTransport string
	// Isolation is the tier of a job or command that names none
	// (AGENTBOX_ISOLATION): "container" (default), "gvisor" or "microvm".
	Isolation string

	Image string
	// Images are the other images a job may ask for (AGENTBOX_IMAGES,
	// comma-separated), normalized with imagename.Normalize; AllowedImages adds
	// Image to them.
	Images []string
	// MemoryBytes, NanoCPUs and PidsLimit are the default resource limits.
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	// Network is the sandbox network mode; "none" unless a caller opts in.
	// The driver checks it (Docker refuses host and container:).
	Network string
	// GuestBinary is the static agentbox binary bind-mounted into sandboxes;
	// empty means the running executable.
	GuestBinary string
	// Instance labels this installation's sandboxes so that two agentbox
	// installations sharing one engine never reap each other's sandboxes.
	Instance string
	// DisplayWidth and DisplayHeight are the sandbox desktop's screen size
	// (AGENTBOX_DISPLAY_SIZE, default 1024x768).
	DisplayWidth, DisplayHeight int
	// DiskBytes is the default disk quota of a sandbox: everything it can
	// write on the host, its workspace included (AGENTBOX_SANDBOX_DISK,
	// default 10 GiB).
	DiskBytes int64
	// NoFile is the RLIMIT_NOFILE (soft and hard) of every process in a
	// sandbox (AGENTBOX_SANDBOX_NOFILE, default 1024).
	NoFile int64
	// UIDs is the range of host uids sandboxes run as, one per sandbox, no
	// host account's (AGENTBOX_SANDBOX_UIDS, default 200000-299999).
	UIDs UIDRange
	// MinFreeDisk is the free space below which no new sandbox starts
	// (AGENTBOX_MIN_FREE_DISK, default 2 GiB).
	MinFreeDisk int64
	// MinFreeInodes is the count of free inodes below which no new sandbox
	// starts (AGENTBOX_MIN_FREE_INODES, default 200,000).
	MinFreeInodes int64
	// Ceilings bound what a job or a command may ask for.
	Ceilings Ceilings
}

// UIDRange is an inclusive range of uids.
type UIDRange struct{ First, Last int }

// Ceilings are the most a job (POST /v1/jobs limits) or a command
// (exec/run flags) may ask for; a request over one is refused. Defaults
// follow the host: half its memory, all its CPUs.
type Ceilings struct {
	MemoryBytes int64         // AGENTBOX_CEILING_MEMORY
	NanoCPUs    int64         // AGENTBOX_CEILING_CPUS
	PidsLimit   int64         // AGENTBOX_CEILING_PIDS
	DiskBytes   int64         // AGENTBOX_CEILING_DISK
	Timeout     time.Duration // AGENTBOX_CEILING_TIMEOUT
	MaxSteps    int           // AGENTBOX_CEILING_STEPS
}

// Model is the language-model configuration. Keys are passed to the SDKs
// explicitly; nothing else reads them from the environment.
type Model struct {
	Name             string // provider:name, from AGENTBOX_MODEL
	AnthropicKey     string // ANTHROPIC_API_KEY
	AnthropicBaseURL string // ANTHROPIC_BASE_URL
	OpenAIKey        string // OPENAI_API_KEY
	OpenAIBaseURL    string // OPENAI_BASE_URL (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter)
}

// Configured reports whether any model can be chosen.
func (m Model) Configured() bool {
	return m.Name != "" || m.AnthropicKey != "" || m.OpenAIKey != "" || m.OpenAIBaseURL != ""
}

// FromEnv returns the defaults overridden by the environment.
func FromEnv() (Config, error) {
	return FromLookup(os.LookupEnv)
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir: empty (set AGENTBOX_DATA_DIR)"))
	}
	errs = append(errs, validStore(c.Store), c.validRole(), c.validBlobs(), c.Sandbox.Validate(), c.Server.Validate(), c.Agent.Validate(), c.Git.Validate(), c.Egress.Validate())
	return errors.Join(errs...)
}

// StoreIsPostgres reports whether store (Config.Store) names a PostgreSQL
// database rather than the SQLite file.
func StoreIsPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// validStore checks Config.Store; its error never shows a password.
func validStore(store string) error {
	if store == "" || store == "sqlite" {
		return nil
	}
	u, err := url.Parse(store)
	if err != nil || !StoreIsPostgres(store) {
		shown := "(unparsable URL)"
		if err == nil {
			shown = u.Redacted()
		}
		return fmt.Errorf("store %s: want sqlite or a postgres:// URL (set AGENTBOX_STORE or --store)", shown)
	}
	return nil
}

// Validate checks the server settings.
func (s Server) Validate() error {
	var errs []error
	if s.Addr == "" {
		errs = append(errs, errors.New("server address: empty (set AGENTBOX_ADDR)"))
	}
	if s.Concurrency < 0 || s.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("concurrency %d: want 0 (API only) to 256", s.Concurrency))
	}
	if s.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d: at least 1", s.MaxAttempts))
	}
	if s.Lease < time.Second || s.JobTimeout < time.Second || s.Grace < 0 {
		errs = append(errs, fmt.Errorf("lease %v and job timeout %v must be at least 1s, grace not negative", s.Lease, s.JobTimeout))
	}
	if s.LiveOutputMax < 0 {
		errs = append(errs, fmt.Errorf("live output max %d: must not be negative", s.LiveOutputMax))
	}
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("public URL %q: want http(s)://host[:port], without a path", s.PublicURL))
		}
	}
	errs = append(errs, s.HTTP.Validate())
	return errors.Join(errs...)
}

// Validate checks the sandbox defaults.
func (s Sandbox) Validate() error {
	var errs []error
	if s.Image == "" {
		errs = append(errs, errors.New("sandbox image: empty"))
	}
	if s.MemoryBytes < 64<<20 {
		errs = append(errs, fmt.Errorf("sandbox memory %d bytes: at least 64MiB", s.MemoryBytes))
	}
	if s.NanoCPUs < 1e7 {
		errs = append(errs, fmt.Errorf("sandbox cpus %.3f: at least 0.01", float64(s.NanoCPUs)/1e9))
	}
	if s.PidsLimit < 32 {
		errs = append(errs, fmt.Errorf("sandbox pids %d: at least 32 (the guest and the init need some)", s.PidsLimit))
	}
	for _, f := range [][2]string{{"sandbox driver", s.Driver}, {"guest transport", s.GuestTransport}, {"sandbox network", s.Network}} {
		if !isWord(f[1]) {
			errs = append(errs, fmt.Errorf("%s %q: must be a non-empty word", f[0], f[1]))
		}
	}
	if !slices.Contains(Isolations, s.Isolation) {
		errs = append(errs, fmt.Errorf("isolation %q (AGENTBOX_ISOLATION): want one of %s", s.Isolation, strings.Join(Isolations, ", ")))
	}
	if w, h := s.DisplayWidth, s.DisplayHeight; w < 320 || h < 200 || w > 7680 || h > 4320 {
		errs = append(errs, fmt.Errorf("display size %dx%d: must be within 320x200..7680x4320", w, h))
	}
	errs = append(errs, s.validateLimits())
	if !isWord(s.Instance) {
		errs = append(errs, fmt.Errorf("instance %q: must be a non-empty word", s.Instance))
	}
	return errors.Join(errs...)
}

// isWord reports whether s is non-empty and has no space, comma or equals
// sign (an instance label, a driver's name).
func isWord(s string) bool { return s != "" && !strings.ContainsAny(s, " \t\n=,") }

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agentbox")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentbox")
	}
	return filepath.Join(os.TempDir(), "agentbox")
}

// Validate checks the agent settings.
func (a Agent) Validate() error {
	var errs []error
	if a.Kind != "model" && a.Kind != "shell" {
		errs = append(errs, fmt.Errorf("agent %q: want model or shell (AGENTBOX_AGENT)", a.Kind))
	}
	if a.ContextWindow != 0 && (a.ContextWindow < 2048 || a.ContextWindow > 10_000_000) {
		errs = append(errs, fmt.Errorf("context window %d: want 0 (the model's) or 2048 to 10,000,000 tokens (AGENTBOX_CONTEXT_WINDOW)", a.ContextWindow))
	}
	if a.MaxSteps < 1 || a.MaxTokens < 0 || a.MaxCostUSD < 0 {
		errs = append(errs, fmt.Errorf("max steps %d must be at least 1, budgets not negative", a.MaxSteps))
	}
	return errors.Join(errs...)
}

package config

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Setting is one setting of agentbox, named once: the environment variable
// that sets it, the flag that overrides it if any, its default, how it is
// read, and what docs/configuration.md says of it. Settings lists them all;
// FromEnv reads them, Default applies their defaults, flags' help and the
// docs' settings table (SettingsTable) are made from them.
type Setting struct {
	// Env is the environment variable, the setting's name.
	Env string
	// Flag is the flag that overrides the setting, on the commands that
	// have it ("--addr"); empty for none.
	Flag string
	// Default is the default as one would set it ("2g", "30s"), read by
	// the setting's parser into Default(); empty: the zero value, or a
	// default that depends on the host (DefaultDoc says which).
	Default string
	// DefaultDoc is the docs' default column when it is not `Default`
	// (or "unset" without one).
	DefaultDoc string
	// Help is the docs' meaning column (Markdown).
	Help string
	// SameRow puts the setting in the docs' row of the one before it.
	SameRow bool
	// FlagZero says a zero value of Flag ("0") is a value: without it,
	// a flag given "", "0" or "false" leaves the setting alone (ApplyFlags).
	FlagZero bool
	// parse reads a non-empty value into c; its error names Env.
	parse func(c *Config, key, v string) error
}

// DefaultText is the setting's default as the docs show it: Markdown,
// "unset" when it has none.
func (s Setting) DefaultText() string {
	switch {
	case s.DefaultDoc != "":
		return s.DefaultDoc
	case s.Default != "":
		return "`" + s.Default + "`"
	}
	return "unset"
}

// Usage is the help of the flag that sets s for a server: what it is,
// then the variable and the default, as in "listen address
// (AGENTBOX_ADDR; default 127.0.0.1:8080)".
func (s Setting) Usage(what string) string {
	return what + " (" + s.Env + "; default " + s.Default + ")"
}

// Fallback is what the help of a flag that overrides s for one job or
// command says of its default: "AGENTBOX_SANDBOX_MEMORY, else 2g".
func (s Setting) Fallback() string { return s.Env + ", else " + s.Default }

// Lookup returns the setting of the environment variable env; it panics
// on a name that is none, a programming error.
func Lookup(env string) Setting {
	for _, s := range Settings {
		if s.Env == env {
			return s
		}
	}
	panic("config: no setting " + env)
}

// Settings are every setting agentbox reads from the environment, in the
// order docs/configuration.md lists them.
var Settings = []Setting{
	{Env: "AGENTBOX_DATA_DIR", Flag: "--data-dir", DefaultDoc: "`$XDG_DATA_HOME/agentbox`, else `~/.local/share/agentbox`", Help: "everything agentbox keeps: `agentbox.db` (the server's SQLite store), `token`, `viewer.key`, `serve.lock`, `workspaces/<job>/`, `sandboxes/<id>/` (the guest's socket, scratch workspaces), `runs/<run>/` (`agentbox run`: its own store, workspaces, `artifacts.zip` and `run.log`), `chats/<session>/` (`agentbox chat`: `history.json`, `session.json` (what it works on, its last message) and `workspace/`, unless it works in place). Keep the path short: a sandbox's socket path (`<data dir>/sandboxes/<id>/run/guest.sock`) must fit in 107 bytes. One server per data dir (`serve.lock` enforces it). `--data-dir` (on `serve`, `run`, `chat`, `exec`, `doctor` and the client commands) overrides it.", parse: str(func(c *Config) *string { return &c.DataDir })},
	{Env: "AGENTBOX_STORE", Flag: "--store", DefaultDoc: "`sqlite`", Help: "where `serve` keeps jobs and their event logs (`serve --store` overrides it): `sqlite` (or empty) for `agentbox.db` in the data dir; a `postgres://user:password@host:port/db?sslmode=…` (or `postgresql://`) URL for a PostgreSQL database that several servers may share, migrated on start ([store.md](store.md#postgresql)). The password is never logged (`xxxxx`). `agentbox run` always uses its own SQLite store in its run directory", parse: str(func(c *Config) *string { return &c.Store })},
	{Env: "AGENTBOX_ROLE", Flag: "--role", Default: RoleAll, Help: "what `serve` runs (`serve --role` overrides it): `all`, the API and the jobs in one process (one host, as always); `api`, REST, SSE and the UI, running no sandboxes (no engine needed); `worker`, claims jobs and runs them on its local engine, serving only its internal endpoint on `--addr`. `api` and `worker` need a PostgreSQL `AGENTBOX_STORE` they all share (with SQLite each process would have jobs of its own); a worker needs `AGENTBOX_CLUSTER_SECRET` and a concurrency of at least 1 ([cluster.md](cluster.md))", parse: str(func(c *Config) *string { return &c.Role })},
	{Env: "AGENTBOX_BLOBS", Flag: "--blobs", DefaultDoc: "`postgres` with a PostgreSQL store, else `none`", Help: "where `serve` keeps workspace checkpoints and final artifacts (`serve --blobs` overrides it): `postgres`, the job store's own database; the absolute path of a directory every host mounts (NFS, a shared volume); `none`, no checkpoints (a job's workspace lives on the host that ran it). With a blob store, workers checkpoint each job's workspace after every step (uploading only what changed), a job whose worker died resumes on another from its last checkpoint, and every API replica serves any job's files, diff and zip ([cluster.md](cluster.md#checkpoints))", parse: str(func(c *Config) *string { return &c.Blobs })},
	{Env: "AGENTBOX_CLUSTER_SECRET", DefaultDoc: "none", Help: "the secret the API replicas and the workers share: it authenticates the API replicas to the workers' internal endpoint (and scrapes of a worker's `/metrics`). At least 32 characters, the same on every process; make one with `head -c 32 /dev/urandom \\| base64`. A `worker` refuses to start without it. Never logged", parse: str(func(c *Config) *string { return &c.Cluster.Secret })},
	{Env: "AGENTBOX_ADVERTISE_ADDR", DefaultDoc: "the listen address", Help: "`host:port` where the other processes reach this one's internal endpoint, as it registers itself (`GET /v1/workers`); default `--addr` with the port it got, the host name in place of `0.0.0.0`/`::`", parse: str(func(c *Config) *string { return &c.Cluster.AdvertiseAddr })},
	{Env: "AGENTBOX_DRIVER", Flag: "--driver", Default: "docker", Help: "the sandbox driver, by name (`--driver` on `serve`, `run`, `exec`, `chat` and `bench` overrides it). Known: `docker` (Docker, or Podman's Docker-compatible API; isolation `container`). An unknown name stops the command, listing the known ones. Each driver checks its own settings (network modes, transports) when it starts", parse: str(func(c *Config) *string { return &c.Sandbox.Driver })},
	{Env: "AGENTBOX_GUEST_TRANSPORT", Default: "unix", Help: "how the host reaches the guest daemon in each new sandbox: `unix`, a socket in the sandbox's state directory (`<data dir>/sandboxes/<id>/run/guest.sock`); or `tcp`, the guest listening on `127.0.0.1:7117` in the sandbox's own network namespace (sandboxes keep `--network none`), which the host enters to connect, every request carrying the sandbox's own random secret ([security.md](security.md#guest-transports)). `tcp` needs root and agentbox in the host's PID namespace. A sandbox is always reached the way it was made, whatever the setting after a restart", parse: str(func(c *Config) *string { return &c.Sandbox.GuestTransport })},
	{Env: "AGENTBOX_ISOLATION", Flag: "--isolation", Default: "container", Help: "the isolation tier of a job, `run`, `exec` or `chat` that names none (`\"isolation\"` in `POST /v1/jobs`, `--isolation` on `run`, `chat`, `exec` and `submit` override it): `container` (runc: namespaces, cgroups, seccomp), `gvisor` (the same container under gVisor's `runsc`, a user-space kernel; needs runsc registered with Docker, which `scripts/setup.sh` does; sandboxes get network `none` only) or `microvm` (a QEMU virtual machine per sandbox with its own kernel, KVM where the host runs guests, else TCG; needs `qemu-system-x86` and root; sandboxes get network `none` only; [microvm.md](microvm.md)). A tier that cannot run here is refused with what is missing and how to install it, never replaced by another; `agentbox doctor` shows which tiers work ([isolation](security.md#isolation-tiers))", parse: str(func(c *Config) *string { return &c.Sandbox.Isolation })},
	{Env: "AGENTBOX_IMAGE", Default: DefaultImage, Help: "the sandbox image; `agentbox image build --tag` / `image inspect --tag` name another one", parse: str(func(c *Config) *string { return &c.Sandbox.Image })},
	{Env: "AGENTBOX_IMAGES", Help: "other images a job may ask for (`\"image\": \"NAME\"` in `POST /v1/jobs`, `submit --image`, `run --image`, `chat --image`), comma-separated, e.g. `python-ml,node-tools:20`. `NAME` and `NAME:latest` are one image (so are `docker.io/library/NAME` and `NAME`). The sandbox image (`AGENTBOX_IMAGE`) is always allowed; any other image is `400 image_not_allowed`, naming the allowed ones. Build them with `agentbox image build --dockerfile PATH --tag NAME` (on top of the sandbox image); nothing is ever pulled: a job whose image is not on the engine ends in error saying how to build it. A sandbox's posture (uid, capabilities, network, limits, mounts, guest) is the same whatever its image ([security.md](security.md#images-per-job))", parse: images},
	{Env: "AGENTBOX_SANDBOX_MEMORY", Flag: "--memory", Default: "2g", Help: "memory limit per sandbox (no swap); `512m`, `4g`, `2GiB`, … (at least 64m)", parse: size(func(c *Config) *int64 { return &c.Sandbox.MemoryBytes })},
	{Env: "AGENTBOX_SANDBOX_CPUS", Flag: "--cpus", Default: "1", Help: "CPU limit per sandbox; fractions allowed (`0.5`; 0.01 to 1024)", parse: cpus(func(c *Config) *int64 { return &c.Sandbox.NanoCPUs })},
	{Env: "AGENTBOX_SANDBOX_PIDS", Flag: "--pids", Default: "512", Help: "process (and thread) limit per sandbox (at least 32: the guest needs some)", parse: count(func(c *Config) *int64 { return &c.Sandbox.PidsLimit })},
	{Env: "AGENTBOX_SANDBOX_DISK", Flag: "--disk", Default: "10g", Help: "disk quota per sandbox: everything it can write on the host, its workspace included (at least 64m; a job's `limits.disk`, `exec --disk`, `run --disk`). Enforced in the kernel where the host allows it, else by a watchdog: see [security.md](security.md#disk-quota). It also bounds the sandbox's files, directories and links: one per 64 KiB of it, at least 16,384, at most 1,048,576 (163,840 for `10g`; [security.md](security.md#inodes))", parse: size(func(c *Config) *int64 { return &c.Sandbox.DiskBytes })},
	{Env: "AGENTBOX_SANDBOX_NOFILE", Default: "1024", Help: "open files per sandbox process (`RLIMIT_NOFILE`, soft and hard; 64 to 1048576). Lowered at start, with a warning, when concurrency × pids × this would pass half of the host's `fs.file-max`; refused when even 256 would (`doctor` shows the margin). Files a sandbox maps and closes outlive this limit, bounded by its memory (~400 bytes each): at start agentbox makes `fs.file-max` at least twice concurrency × `AGENTBOX_CEILING_MEMORY` / 400, raising it when run as root, refusing otherwise (`setup.sh` sets it as systemd does)", parse: count(func(c *Config) *int64 { return &c.Sandbox.NoFile })},
	{Env: "AGENTBOX_SANDBOX_UIDS", Default: "200000-299999", Help: "the host uids sandboxes run as, one per sandbox, named `agent` inside; no host account may use them (`doctor` checks). At least 16 uids, from 10000 up, not 65534", parse: uids},
	{Env: "AGENTBOX_MIN_FREE_DISK", Default: "2g", Help: "no new sandbox starts while the free space of the data dir's (or a workspace's) filesystem is below this; the job ends in error saying so. `doctor` and `/metrics` (`agentbox_disk_free_bytes`, `agentbox_disk_min_free_bytes`) show it; `0` turns the floor off", parse: size(func(c *Config) *int64 { return &c.Sandbox.MinFreeDisk })},
	{Env: "AGENTBOX_MIN_FREE_INODES", Default: "200000", Help: "no new sandbox starts while the data dir's (or a workspace's) filesystem has fewer free inodes than this (a filesystem that counts none, like btrfs, is not checked); the job ends in error saying so, and the container tier's disk watchdog stops a running sandbox below it. `doctor` shows it; `0` turns the floor off", parse: count(func(c *Config) *int64 { return &c.Sandbox.MinFreeInodes })},
	{Env: "AGENTBOX_RETENTION", Default: "168h", DefaultDoc: "`168h` (7 days)", Help: "how long the workspace of an ended job is kept; then the server removes it, and the job is marked deleted (its record and log stay). `0` keeps workspaces for ever; `DELETE /v1/jobs/{id}` removes one at once", parse: duration(func(c *Config) *time.Duration { return &c.Server.Retention })},
	{Env: "AGENTBOX_MAX_UPLOAD", Default: "1g", Help: "how many bytes a workspace uploaded with a job (a zip or a tar.gz) may unpack to, counted as they are written; a larger one, or one of more than 200,000 entries, is refused with 413 (sizes as for `AGENTBOX_SANDBOX_DISK`: `512m`, `2g`). The same bound holds for `workspace_from`'s copy of another job's workspace and `agentbox run --workspace`'s and `chat --workspace`'s copy of a directory; a multipart request may be this plus 64 MiB (and the 1 MiB of its job part)", parse: size(func(c *Config) *int64 { return &c.Server.MaxUpload })},
	{Env: "AGENTBOX_LIVE_OUTPUT_MAX", Default: "8m", Help: "how many bytes of its commands' output one job stores as `output` events while they run, counted as stored (a control byte, a byte that is no UTF-8, `<`, `>` or `&` takes six: a `\\u` escape; each event 64 more) (what `run`, `chat`, `logs`, SSE and the UI show live, batched at most one event per stream per 100 ms or 32 KiB); past it, one `log` event says so and the rest is not shown live, while each step's result still carries its (capped) output. Sizes as for `AGENTBOX_MAX_UPLOAD`. No flag.", parse: size(func(c *Config) *int64 { return &c.Server.LiveOutputMax })},
	{Env: "AGENTBOX_CEILING_MEMORY", DefaultDoc: "half the host's memory (at least 2g)", Help: "the most a job (`limits` in `POST /v1/jobs`) or a command (`exec`/`run`/`chat` flags) may ask for: over one is refused (`400 over_ceiling`, naming the limit and its ceiling). The sandbox defaults above must be within them", parse: size(func(c *Config) *int64 { return &c.Sandbox.Ceilings.MemoryBytes })},
	{Env: "AGENTBOX_CEILING_CPUS", DefaultDoc: "the host's CPUs", SameRow: true, parse: cpus(func(c *Config) *int64 { return &c.Sandbox.Ceilings.NanoCPUs })},
	{Env: "AGENTBOX_CEILING_PIDS", Default: "4096", SameRow: true, parse: count(func(c *Config) *int64 { return &c.Sandbox.Ceilings.PidsLimit })},
	{Env: "AGENTBOX_CEILING_DISK", Default: "100g", SameRow: true, parse: size(func(c *Config) *int64 { return &c.Sandbox.Ceilings.DiskBytes })},
	{Env: "AGENTBOX_CEILING_TIMEOUT", Default: "24h", SameRow: true, parse: duration(func(c *Config) *time.Duration { return &c.Sandbox.Ceilings.Timeout })},
	{Env: "AGENTBOX_CEILING_STEPS", Default: "100000", SameRow: true, parse: integer(func(c *Config) *int { return &c.Sandbox.Ceilings.MaxSteps })},
	{Env: "AGENTBOX_SANDBOX_NETWORK", Flag: "--network", Default: "none", Help: "the container network of new sandboxes; `bridge` or a named network gives every container sandbox that network **outside the egress proxy** (no policy, no transcript, the host's private services in reach): prefer a job's `network` policy ([network.md](network.md)). `host`, `container:…` and `ns:…` (sharing another namespace) are refused, by the Docker driver when it starts (a command that makes sandboxes stops, saying so).", parse: str(func(c *Config) *string { return &c.Sandbox.Network })},
	{Env: "AGENTBOX_GUEST_BINARY", DefaultDoc: "the running `agentbox`", Help: "the static agentbox binary bind-mounted into sandboxes as the guest daemon. It must be built with `CGO_ENABLED=0` (`make build`); agentbox refuses a dynamically linked one.", parse: str(func(c *Config) *string { return &c.Sandbox.GuestBinary })},
	{Env: "AGENTBOX_DISPLAY_SIZE", Default: "1024x768", Help: "the sandbox desktop's screen size, `WIDTHxHEIGHT` within 320x200..7680x4320. Screenshots are scaled for the model (see [tools](tools.md)).", parse: displaySize},
	{Env: "AGENTBOX_INSTANCE", Default: "default", Help: "a label on every sandbox; installations sharing one engine use different values so that each lists (and reaps) only its own sandboxes. One word: no spaces, `=` or `,`.", parse: str(func(c *Config) *string { return &c.Sandbox.Instance })},
	{Env: "DOCKER_HOST", DefaultDoc: "the engine's default socket", Help: "the engine to use; for Podman: `unix:///run/podman/podman.sock` (rootful) or `unix://$XDG_RUNTIME_DIR/podman/podman.sock` (rootless)", parse: str(func(c *Config) *string { return &c.Docker.Host })},
	{Env: "AGENTBOX_ADDR", Flag: "--addr", Default: "127.0.0.1:8080", Help: "`serve`'s listen address (`--addr`)", parse: str(func(c *Config) *string { return &c.Server.Addr })},
	{Env: "AGENTBOX_TOKEN", Flag: "--token", Help: "a bearer token the API accepts; the CLI sends it too (`--token`)", parse: token},
	{Env: "AGENTBOX_TOKEN_FILE", Help: "a file holding a token the API accepts (surrounding whitespace trimmed; an empty file is refused). With both this and `AGENTBOX_TOKEN` set, either token is accepted. Without either, `serve` generates `<data dir>/token` (64 hex characters, mode 0600) on first start and logs its path; it refuses a token file that group or others can read. The CLI reads this file (else `<data dir>/token`, `--data-dir` naming the data dir) when it has no token of its own and the server URL is a loopback address", parse: str(func(c *Config) *string { return &c.Server.TokenFile })},
	{Env: "AGENTBOX_VIEW_URL", Flag: "--view-url", Help: "gives each job's desktop and Jupyter views an origin of their own: a template `http(s)://{job}.DOMAIN[:PORT]`, e.g. `https://{job}.view.example.com` (a wildcard DNS name, and certificate, reaching this server) or `http://{job}.localhost:8080` on one machine. Viewer links and cookies then work on `job-<hex>.DOMAIN` only, which serves nothing but that job's views; the API's host serves the views to bearer-token programs only. Without auth, only `.localhost` templates are accepted. See [docs/api.md](api.md#an-origin-per-job-agentbox_view_url). `serve --view-url` overrides it.", parse: str(func(c *Config) *string { return &c.Server.ViewURL })},
	{Env: "AGENTBOX_VIEWER_KEY_FILE", DefaultDoc: "`<data dir>/viewer.key`", Help: "the key that signs viewer links and cookies (`agentbox view`): at least 32 characters of random text (the generated one is 64 hex digits), mode 0600 (a file others can read is refused). The default file is generated on first start, so viewer cookies outlive a restart; a file named here must exist (`head -c 32 /dev/urandom \\| base64 > FILE; chmod 600 FILE`). Replicas behind one address share one.", parse: str(func(c *Config) *string { return &c.Server.ViewerKeyFile })},
	{Env: "AGENTBOX_PUBLIC_URL", Flag: "--public-url", Help: "where clients reach the server (`http(s)://host[:port]`, no path), e.g. behind a TLS-terminating proxy: links in answers and `agentbox view` links are made absolute with it, an `https` URL makes the viewer cookie `Secure`, and a WebSocket from that origin is accepted. `serve --public-url` overrides it.", parse: str(func(c *Config) *string { return &c.Server.PublicURL })},
	{Env: "AGENTBOX_HTTP_HEADER_TIMEOUT", Default: "10s", Help: "how long a request's headers may take to arrive; then the connection is closed (at least `100ms`)", parse: duration(func(c *Config) *time.Duration { return &c.Server.HTTP.HeaderTimeout })},
	{Env: "AGENTBOX_HTTP_IDLE_TIMEOUT", Default: "2m", Help: "how long a kept-alive connection may wait for its next request (at least `100ms`)", parse: duration(func(c *Config) *time.Duration { return &c.Server.HTTP.IdleTimeout })},
	{Env: "AGENTBOX_HTTP_BODY_TIMEOUT", Default: "30s", Help: "how long a request's body may take to arrive, from the end of its headers: then `408 request_timeout` and the connection is closed, whatever the route (a body the route refuses before reading it, such as one without a token, is read under the same deadline). Requests without a body (event streams, downloads, the desktop's and Jupyter's WebSockets) have no such deadline. At least `100ms`", parse: duration(func(c *Config) *time.Duration { return &c.Server.HTTP.BodyTimeout })},
	{Env: "AGENTBOX_HTTP_MIN_UPLOAD_RATE", Default: "32k", Help: "for uploads (a multipart submission, a body sent to a job's desktop or Jupyter, and all bodies of a worker's internal endpoint) in place of the body timeout: after its first `AGENTBOX_HTTP_BODY_TIMEOUT`, an upload must have come at this average rate, in bytes a second (sizes as for `AGENTBOX_SANDBOX_DISK`), and never pause longer than `AGENTBOX_HTTP_BODY_TIMEOUT`; so a 1 GiB upload may take up to 9 hours at the default, a slower one is cut (`408`)", parse: size(func(c *Config) *int64 { return &c.Server.HTTP.MinUploadRate })},
	{Env: "AGENTBOX_HTTP_WRITE_TIMEOUT", Default: "60s", Help: "how long the server may wait for a client to read what it sends: a response, a download, an event stream or a WebSocket whose client takes nothing for this long is cut and its connection closed, freeing its place (the kernel lets a write on once the client has read about half of the socket's send buffer, which grows to a few MiB at most). Streams and downloads that keep being read last as long as they take; an idle event stream or WebSocket sends nothing, so it is not cut. It applies to every connection `serve` accepts, a worker's internal endpoint's included. At least `100ms`", parse: duration(func(c *Config) *time.Duration { return &c.Server.HTTP.WriteTimeout })},
	{Env: "AGENTBOX_HTTP_MAX_CONNS_PER_ADDR", Default: "128", Help: "connections one client address may hold at once (an IPv6 address counted by its `/64`); the next is answered `503 unavailable` once its request's headers are in (a second at most) and closed, without reaching the API. Loopback addresses count too: the CLI and a browser use a handful. Behind a reverse proxy or load balancer every client has its address: set `0` (no bound) and bound clients there. In a cluster each API replica is one address to a worker: keep this above the desktop and Jupyter connections one replica may pass to one worker ([cluster.md](cluster.md))", parse: integer(func(c *Config) *int { return &c.Server.HTTP.MaxConnsPerAddr })},
	{Env: "AGENTBOX_HTTP_MAX_CONNS", Default: "4096", Help: "connections all clients may hold at once (at least 16, and at least the bound per address); the next is answered `503` and closed. `serve` lowers it to half its open-file limit (`RLIMIT_NOFILE`), with a warning, so a flood leaves files for everything else", parse: integer(func(c *Config) *int { return &c.Server.HTTP.MaxConns })},
	{Env: "AGENTBOX_NO_AUTH", Flag: "--no-auth", Help: "`1` or `true` turns auth off (`serve --no-auth`); refused unless the address is loopback", parse: noAuth},
	{Env: "AGENTBOX_URL", Flag: "--url", Default: "http://127.0.0.1:8080", Help: "the server the CLI talks to (`--url`)", parse: str(func(c *Config) *string { return &c.Client.URL })},
	{Env: "AGENTBOX_CONCURRENCY", Flag: "--concurrency", Default: "2", Help: "jobs run at once per server, `0` to 256; `0` serves the API only (`--concurrency`)", FlagZero: true, parse: integer(func(c *Config) *int { return &c.Server.Concurrency })},
	{Env: "AGENTBOX_LEASE", Flag: "--lease", Default: "30s", Help: "how long a job's claim lasts without a heartbeat (at least 1s; `--lease`); a crashed server's jobs run again after this (a restarted server reclaims its own at once)", parse: duration(func(c *Config) *time.Duration { return &c.Server.Lease })},
	{Env: "AGENTBOX_JOB_TIMEOUT", Flag: "--job-timeout", Default: "30m", Help: "wall-clock limit of a job that names none (`limits.timeout`); at least 1s (`serve --job-timeout`; `run --timeout` for one job)", parse: duration(func(c *Config) *time.Duration { return &c.Server.JobTimeout })},
	{Env: "AGENTBOX_MAX_ATTEMPTS", Default: "3", Help: "how many times a job is started in all (a run cut short by a dead worker counts) before it ends in error; at least 1. No flag.", parse: integer(func(c *Config) *int { return &c.Server.MaxAttempts })},
	{Env: "AGENTBOX_GRACE", Flag: "--grace", Default: "30s", FlagZero: true, Help: "on SIGTERM or Ctrl-C: how long running jobs may finish before they are stopped and handed back (pending); `0` stops them at once (`--grace`)", parse: duration(func(c *Config) *time.Duration { return &c.Server.Grace })},
	{Env: "AGENTBOX_MODEL", Flag: "--model", Help: "the default model, `anthropic:NAME` or `openai:NAME`; without it, the provider whose key is set, with its default model (docs/models.md)", parse: str(func(c *Config) *string { return &c.Model.Name })},
	{Env: "ANTHROPIC_API_KEY", Help: "Anthropic's key, and a proxy or compatible server", parse: str(func(c *Config) *string { return &c.Model.AnthropicKey })},
	{Env: "ANTHROPIC_BASE_URL", SameRow: true, parse: str(func(c *Config) *string { return &c.Model.AnthropicBaseURL })},
	{Env: "OPENAI_API_KEY", Help: "OpenAI's key, or any OpenAI-compatible server (Ollama: `http://localhost:11434/v1`, no key)", parse: str(func(c *Config) *string { return &c.Model.OpenAIKey })},
	{Env: "OPENAI_BASE_URL", SameRow: true, parse: str(func(c *Config) *string { return &c.Model.OpenAIBaseURL })},
	{Env: "AGENTBOX_AGENT", Flag: "--agent", Default: "model", Help: "what works on jobs (`serve --agent`, and `run`): `model` (the agent loop) or `shell` (the task is run as a bash script; for scripting and tests)", parse: str(func(c *Config) *string { return &c.Agent.Kind })},
	{Env: "AGENTBOX_MAX_STEPS", Flag: "--max-steps", Default: "100", Help: "model steps of a job that sets no `limits.max_steps` (at least 1; `run --max-steps` for one job)", parse: integer(func(c *Config) *int { return &c.Agent.MaxSteps })},
	{Env: "AGENTBOX_MAX_TOKENS", DefaultDoc: "unset (no budget)", Help: "per-job budgets: all tokens (input, output and cached ones), and US dollars at the model's price (docs/models.md); the job ends in error once one is used up", parse: count(func(c *Config) *int64 { return &c.Agent.MaxTokens })},
	{Env: "AGENTBOX_MAX_COST", DefaultDoc: "unset (no budget)", SameRow: true, parse: maxCost},
	{Env: "AGENTBOX_CONTEXT_WINDOW", DefaultDoc: "the model's", Help: "the context window the agent (and `chat`) keeps every prompt within, in tokens; a job's `limits.context_window` overrides it (see docs/context.md)", parse: integer(func(c *Config) *int { return &c.Agent.ContextWindow })},
	{Env: "AGENTBOX_GIT_TOKEN", Help: "the password (a personal access or app token) the server sends to HTTPS remotes when it clones (and pushes) a job's `repo`, and the token of the pull-request APIs ([below](#pull-requests)); unset: the server's own git credential helper (`credential.helper` in its user's `~/.gitconfig`) answers, if any. Given to the server's git processes only, through their environment; never in a URL, a file, a message or a sandbox. See [Git](#git)", parse: str(func(c *Config) *string { return &c.Git.Token })},
	{Env: "AGENTBOX_GIT_TOKEN_USER", Default: "x-access-token", Help: "the user name sent with the token, unless the repository URL names one (`https://alice@host/…`)", parse: str(func(c *Config) *string { return &c.Git.TokenUser })},
	{Env: "AGENTBOX_GIT_TOKEN_HOSTS", DefaultDoc: "unset (every host)", Help: "comma-separated `host` or `host:port`: the only hosts the token is sent to. Set it on a server others submit to: anyone who may submit a job names the URL", parse: tokenHosts},
	{Env: "AGENTBOX_GIT_SSH_KEY", Help: "a private key file (no passphrase) for SSH remotes (`ssh -i KEY -o IdentitiesOnly=yes`); unset: the server's ssh agent (`SSH_AUTH_SOCK`) and ssh config", parse: str(func(c *Config) *string { return &c.Git.SSHKey })},
	{Env: "AGENTBOX_GIT_SSH_KNOWN_HOSTS", Help: "a known_hosts file SSH remotes' host keys must be in (`StrictHostKeyChecking=yes`); unset: `<data dir>/ssh_known_hosts`, where a host's key is recorded the first time (`accept-new`) and checked every time after", parse: str(func(c *Config) *string { return &c.Git.SSHKnownHosts })},
	{Env: "AGENTBOX_GIT_AUTHOR", Default: "agentbox <agentbox@localhost>", Help: "`Name <email>`: the author and committer of the server's commits (`?format=patch`, the push at a job's end), and `user.name`/`user.email` in the `.git/config` of a cloned workspace so the agent can commit", parse: str(func(c *Config) *string { return &c.Git.Author })},
	{Env: "AGENTBOX_GIT_ALLOW_LOCAL", Default: "true", Help: "whether a job's `repo.url` may be a local path or `file://` URL on the server (`false` on a server whose users must not read its disk); paths inside the data dir are refused anyway", parse: allowLocal},
	{Env: "AGENTBOX_GIT_TIMEOUT", Default: "10m", Help: "the longest one git run of the server may take (a clone, a diff, a push), and each step of a job's hand-back (its commit, its push, its pull request); at least 1s", parse: duration(func(c *Config) *time.Duration { return &c.Git.Timeout })},
	{Env: "AGENTBOX_GIT_MEMORY", Default: "1GiB", Help: "the memory (heap, `RLIMIT_DATA`) each git run of the server may take; a run that needs more fails and says so (a diff answers 503 naming this setting). Each run also gets `AGENTBOX_GIT_TIMEOUT` of CPU time and a lower priority (nice 10) than the server. Raise it to clone very large repositories; at least 64MiB", parse: size(func(c *Config) *int64 { return &c.Git.Memory })},
	{Env: "AGENTBOX_GIT_BIG_FILE", Default: "1MiB", Help: "files larger than this are named in a diff (`Binary files a/x and b/x differ`) rather than diffed line by line (git's `core.bigFileThreshold`): git's text diff takes about 44 bytes of memory per line, so a file of newlines written in a sandbox would otherwise cost the server 44 times its size. The zip's workspace holds such a file whole. 4KiB to 512MiB", parse: size(func(c *Config) *int64 { return &c.Git.BigFile })},
	{Env: "AGENTBOX_GIT_DIFFS", Default: "2", Help: "how many diffs the server makes at once (the diff API, the zip's `agentbox.diff`, the UI's Diff tab); more wait their turn (until their request ends). An ended job's diff is made once and kept in `<data dir>/git/<job>.diffs/` until the job runs again or its data is removed; making it stops with a 503 when the data dir's filesystem is under `AGENTBOX_MIN_FREE_DISK`. An ended repository job's patch (`?format=patch`) is kept the same way", parse: integer(func(c *Config) *int { return &c.Git.Diffs })},
	{Env: "AGENTBOX_GIT_MAX_DIFF", Default: "256MiB", Help: "the most bytes a job's diff (or patch) may take: past it, git is stopped and the diff answers 503 naming this setting, and the zip's manifest says why it has no `agentbox.diff` (the workspace's files are in the zip). A diff's size is the sandbox's choice: one 2-byte file hard-linked 40,000 times at 4 KiB paths made a 484 MB diff. For an ended job the refusal (this one, or git stopped at `AGENTBOX_GIT_MEMORY` or its CPU time) is remembered until the job runs again, so asking again answers at once; at least 1MiB", parse: size(func(c *Config) *int64 { return &c.Git.MaxDiff })},
	{Env: "AGENTBOX_GIT_HOSTS", DefaultDoc: "unset (github.com only)", Help: "comma-separated `KIND=HOST[=APIBASE]`: the git hosts whose pull requests the server opens and the API it opens them with. `KIND` is `github` (github.com, GitHub Enterprise) or `gitea` (Gitea; `forgejo` is the same); `HOST` is `host[:port]` as in the clone URL. See [Pull requests](#pull-requests)", parse: trimmed(func(c *Config) *string { return &c.Git.Hosts })},
	{Env: "AGENTBOX_EGRESS_PRESETS", DefaultDoc: "unset (no presets)", Help: "the path of a JSON or YAML file of named lists of allow entries a job names in its policy (`\"network\": {\"presets\": [\"python\"]}`, `--preset python`): `{\"python\": [\"pypi.org\", \"files.pythonhosted.org\"], \"node\": [\"registry.npmjs.org\"]}`. Each entry as in a job's `allow` (`host[:port]`, `*.domain`, an IP or CIDR, or `{\"host\": …, \"methods\": [...]}`); a name is letters, digits, `.`, `_`, `-`. A job extends a preset with its own entries, never replaces it. agentbox ships none built in: [egress-presets.example.yaml](egress-presets.example.yaml) has `python`, `node`, `github` and `go` to copy. Read at start; a bad entry stops it, naming the preset and the entry", parse: trimmed(func(c *Config) *string { return &c.Egress.Presets })},
	{Env: "AGENTBOX_EGRESS_SECRETS", DefaultDoc: "unset (no secrets)", Help: "the path of a JSON file binding credentials to hosts: `{\"github\": {\"hosts\": [\"api.github.com\"], \"header\": \"Authorization: Bearer {value}\", \"env\": \"GH_TOKEN\"}}`. A job naming the secret (`\"secrets\": [\"github\"]`, `--secret github`) may reach its hosts on 443; the egress proxy adds the header, `{value}` replaced by the value, to its requests to them, and the sandbox holds only a placeholder (in the variable `placeholder` names, else the secret's name upper-cased). The value is the server's environment variable `env`, or the contents of the server's file `file` (an absolute path): exactly one of the two. Checked at start (hosts are allow entries; the header is `Name: …{value}…` on one line); the values are not read then, but when a job first uses them", parse: trimmed(func(c *Config) *string { return &c.Egress.Secrets })},
	{Env: "AGENTBOX_EGRESS_DEFAULT", DefaultDoc: "`{\"mode\":\"none\"}`", Help: "the egress policy of a job that states none, as inline JSON (`{\"presets\": [\"python\"]}`) or `@PATH` of a file holding it; checked at start against the presets, secrets and modes (a bad one stops it, naming this variable and the field)", parse: trimmed(func(c *Config) *string { return &c.Egress.Default })},
	{Env: "AGENTBOX_EGRESS_MODES", DefaultDoc: "`none,allow,open`", Help: "the egress modes a job may ask for, comma-separated: `none` (reaches nothing), `allow` (the hosts its allow entries, presets and secrets name) and `open` (any public host but those it denies). A job asking for another is refused (`400`, field `network.mode`); drop `open` to keep every job to a list", parse: trimmed(func(c *Config) *string { return &c.Egress.Modes })},
	{Env: "AGENTBOX_EGRESS_ALLOW_PRIVATE", Help: "CIDRs or single addresses, comma-separated (`10.1.0.0/16,192.168.5.7`), that the egress proxy connects to although they are private, loopback or link-local: a private package mirror's. Whatever a job's policy says, every other such address (and port 25) is refused", parse: trimmed(func(c *Config) *string { return &c.Egress.AllowPrivate })},
	{Env: "AGENTBOX_EGRESS_RESOLVE", Help: "pins names for the egress proxy, like curl's `--resolve`: `name=address,name=address` (repeat a name for several addresses), e.g. `mirror.internal=10.1.2.3`. The proxy resolves these names to these addresses instead of asking DNS; the address must still be public or in `AGENTBOX_EGRESS_ALLOW_PRIVATE`", parse: trimmed(func(c *Config) *string { return &c.Egress.Resolve })},
	{Env: "AGENTBOX_EGRESS_CA", DefaultDoc: "unset (the system's roots)", Help: "a PEM file of certificate authorities the egress proxy trusts, besides the system's, when it verifies the upstream certificate of a host it terminates TLS for (a secret's host, an allow entry with methods): a private mirror's CA. Every sandbox's trust bundle (`SSL_CERT_FILE`, `PIP_CERT`, `NODE_EXTRA_CA_CERTS`, …) holds these certificates too, so that its tools trust the mirror the proxy tunnels to", parse: trimmed(func(c *Config) *string { return &c.Egress.CA })},
	{Env: "AGENTBOX_EGRESS_BYTES", Default: "10g", Help: "the bytes a job's sandbox may move through the egress proxy, in and out together, when the job sets no `limits.egress` (sizes as for `AGENTBOX_SANDBOX_DISK`; at least 1m). Past it the connection is closed and an event says why", parse: size(func(c *Config) *int64 { return &c.Egress.Bytes })},
	{Env: "AGENTBOX_EGRESS_CONNS", Default: "64", Help: "the connections one job's sandbox may hold open through the egress proxy at once (1 to 4096); one more is refused", parse: integer(func(c *Config) *int { return &c.Egress.Conns })},
	{Env: "AGENTBOX_EGRESS_IDLE", Default: "2m", Help: "how long a connection through the egress proxy may carry nothing before the proxy closes it (at least 1s)", parse: duration(func(c *Config) *time.Duration { return &c.Egress.Idle })},
}

// Default returns the configuration used when nothing is set: each
// setting's Default, then what depends on the host (the data dir, the
// memory and CPU ceilings).
func Default() Config {
	c := defaults()
	c.DataDir = defaultDataDir()
	return c
}

// defaults are the settings' defaults, read once.
var defaults = sync.OnceValue(func() Config {
	c := Config{Sandbox: Sandbox{Ceilings: hostCeilings()}}
	for _, s := range Settings {
		if s.Default == "" {
			continue
		}
		if err := s.parse(&c, s.Env, s.Default); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", s.Env, err))
		}
	}
	return c
})

// FromLookup is the defaults overridden by the variables lookup finds set
// and not empty, then validated.
func FromLookup(lookup func(string) (string, bool)) (Config, error) {
	c := Default()
	var errs []error
	for _, s := range Settings {
		if v, ok := lookup(s.Env); ok && v != "" {
			errs = append(errs, s.parse(&c, s.Env, v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// ApplyFlags sets in c, over what the environment said, each setting
// whose Flag flag reports as given, with its value as typed ("--addr").
// A zero value ("", "0", "false") leaves the setting alone unless the
// setting's FlagZero says it is a value. The result is not validated.
func ApplyFlags(c *Config, flag func(name string) (string, bool)) error {
	var errs []error
	for _, s := range Settings {
		v, ok := "", false
		if s.Flag != "" {
			v, ok = flag(s.Flag)
		}
		if !ok || !s.FlagZero && (v == "" || v == "0" || v == "false") {
			continue
		}
		if err := s.parse(c, s.Env, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Flag, err))
		}
	}
	return errors.Join(errs...)
}

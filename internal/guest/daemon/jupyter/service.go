package jupyter

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// port is the notebook server's TCP port on loopback.
const port = "8888"

// Addr is where the notebook server listens: the guest's proxy sends
// guest.ServiceJupyter's requests there.
const Addr = "127.0.0.1:" + port

// BasePath is the notebook server's base URL path when the host serves the
// sandbox's web services under webBase (for a job, "/v1/jobs/{id}").
func BasePath(webBase string) string { return webBase + "/jupyter/" }

// baseURL is the notebook server's URL inside the sandbox, base path included.
func baseURL(webBase string) string { return "http://" + Addr + BasePath(webBase) }

// Service describes the notebook server for the supervisor, as
// guest.ServiceJupyter: its notebooks are in workspace, its pages under
// BasePath(webBase).
func Service(workspace, webBase string) *supervise.Spec {
	// Every probe gets a new connection: the supervisor outlives no
	// connection it made.
	probe := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	return &supervise.Spec{
		Name:    guest.ServiceJupyter,
		Argv:    argv(workspace, webBase),
		Ready:   func(ctx context.Context) error { return ready(ctx, probe, baseURL(webBase)) },
		Recheck: true,
	}
}

// argv runs the notebook server for the kernel API and the proxy: no
// browser, no token or password (the host authenticates, and only the
// guest's proxy reaches it), no XSRF check (API clients carry no cookie),
// and a base URL matching the path the host serves it under. The proxy
// rewrites Host and Origin to the server's own address, so its local-host
// and same-origin checks pass without loosening them.
func argv(workspace, webBase string) []string {
	return []string{"jupyter", "notebook", "--no-browser",
		"--ip=127.0.0.1", "--port=" + port, "--port-retries=0",
		"--NotebookApp.token=", "--NotebookApp.password=",
		"--NotebookApp.disable_check_xsrf=True", "--NotebookApp.quit_button=False",
		// The guest caps output itself; the server's default 1 MB/s limit
		// would drop a fast print's output entirely. The limit stays finite
		// so that a huge print is dropped, with the server's "IOPub data
		// rate exceeded" notice, rather than relayed as one WebSocket
		// message over jupyterReadLimit, which breaks the connection and
		// costs the kernel. Averaged over the server's 3 s window, 5e6
		// bytes a second lets through stream messages of up to 15 MB,
		// which the server relays as JSON of at most three times that
		// (non-ASCII characters escaped): 45 MB. Only stream output counts.
		"--NotebookApp.iopub_data_rate_limit=5.0e6", "--NotebookApp.iopub_msg_rate_limit=1.0e10",
		"--NotebookApp.base_url=" + BasePath(webBase),
		"--notebook-dir=" + workspace,
	}
}

// ready reports whether the notebook server answers its API. It talks the
// protocol rather than only connect: a server being killed still has its
// listening socket accept for a moment, but never answers again.
func ready(ctx context.Context, tr http.RoundTripper, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"api", nil)
	if err != nil {
		return err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jupyter answered %s", resp.Status)
	}
	return nil
}

// Supervisor is what the kernel needs of the guest's service supervisor.
type Supervisor interface {
	// Ensure makes a service (guest.ServiceJupyter) run and answer.
	Ensure(ctx context.Context, name string) error
}

// Config configures a Kernel.
type Config struct {
	// WebBase is the URL path the notebook server was started under (see
	// Service).
	WebBase string
	// Workspace is the open workspace; the images code displays are saved
	// in it.
	Workspace Workspace
	// Services starts the notebook server.
	Services Supervisor
	Log      *slog.Logger
}

// Workspace is the workspace as the kernel writes into it: an os.Root, or
// the guest's own root that walks each path first.
type Workspace interface {
	MkdirAll(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Remove(name string) error
}

// Kernel is the sandbox's one persistent Python kernel.
type Kernel struct {
	state *kernelState
	j     jupyter
	out   outputs
	log   *slog.Logger
}

// New returns the kernel of cfg; nothing starts until it is first used.
func New(cfg Config) *Kernel {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	state := newKernelState(cfg.Log)
	up := func(ctx context.Context) error { return cfg.Services.Ensure(ctx, guest.ServiceJupyter) }
	return &Kernel{
		state: state, j: jupyter{base: baseURL(cfg.WebBase), http: state.http, up: up},
		out: outputs{cfg.Workspace}, log: cfg.Log,
	}
}

// Execute runs req's code in the kernel, starting the notebook server and
// the kernel, or replacing a dead kernel, as needed. Errors are
// *guest.Error: a bad request, or the notebook server could not be used
// (guest.CodeService, which is also logged).
func (k *Kernel) Execute(ctx context.Context, req guest.KernelRequest) (guest.KernelResult, error) {
	if err := checkKernelRequest(req); err != nil {
		return guest.KernelResult{}, err
	}
	res, err := k.state.execute(ctx, k.j, req, k.out.saveOutput)
	if err != nil {
		k.log.Warn("kernel execute", "err", err)
		return guest.KernelResult{}, serviceError(err)
	}
	return res, nil
}

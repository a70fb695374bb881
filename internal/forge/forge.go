// Package forge opens pull requests on git hosting services once the host
// has pushed a job's branch: the GitHub REST API (github.com or a GitHub
// Enterprise server) and the Gitea API (Gitea and Forgejo, which speaks
// Gitea's API).
//
// The operator lists the services in AGENTBOX_GIT_HOSTS (see ParseHosts);
// github.com is always known. The token comes from a separate value,
// AGENTBOX_GIT_TOKEN, which the caller sets on every Host: the token is sent
// only in the Authorization header, to the host's APIBase, and never appears
// in an error or a URL. An APIBase must be https unless its host is a
// loopback address (a service on the same machine, and tests).
//
// Timeouts come from the ctx given to Open. Responses are read up to a cap,
// so a misbehaving service cannot exhaust the host's memory.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Kind is the API a service speaks.
type Kind string

// The kinds of service. Forgejo speaks Gitea's API: configure it as KindGitea.
const (
	KindGitHub Kind = "github"
	KindGitea  Kind = "gitea"
)

// Host is one configured service.
type Host struct {
	Kind Kind
	// Host is the git remote's host name this service serves, host[:port]
	// as in the clone URL: "github.com", "git.example.com:3000".
	Host string
	// APIBase is the root of the service's REST API:
	// "https://api.github.com", "https://ghe.example.com/api/v3",
	// "https://git.example.com/api/v1". It must be https unless its host is
	// a loopback address.
	APIBase string
	// Token authenticates to the API (AGENTBOX_GIT_TOKEN, set by the caller
	// on every Host).
	Token string
}

// PullRequest is what to open. Owner and Repo name the repository the pull
// request is opened on; left empty, they come from the remote URL. Head is
// the pushed branch ("branch", or "owner:branch" for a fork), Base the
// branch it is to be merged into.
type PullRequest struct {
	Owner, Repo, Head, Base, Title, Body string
	// Draft opens a draft pull request: GitHub's draft field, a "WIP: "
	// title prefix on Gitea (Gitea's convention for work in progress).
	Draft bool
}

// Opened is the pull request that was opened, or the open one that already
// existed for the same branches.
type Opened struct {
	URL    string
	Number int
}

var (
	// ErrUnknownHost means no service is configured for the remote's host.
	ErrUnknownHost = errors.New("no API configured for git host")
	// ErrNoToken means the service for the remote's host has no token.
	ErrNoToken = errors.New("no token for git host")
	// ErrAlreadyExists means the service refused because a pull request for
	// the same branches exists, and no open one could be found to return.
	ErrAlreadyExists = errors.New("a pull request already exists")
)

// defaultGitHub is the github.com service every Client knows, given a token.
var defaultGitHub = Host{Kind: KindGitHub, Host: "github.com", APIBase: "https://api.github.com"}

// Client opens pull requests on the configured services.
type Client struct {
	hosts []Host
	http  *http.Client
}

// New returns a Client for hosts. github.com is added (APIBase
// https://api.github.com, no token) when hosts do not name it. A nil httpClient means a
// plain one; either way the Client refuses redirects to an insecure URL.
// Requests carry no timeout of their own: give Open a ctx with a deadline.
func New(hosts []Host, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	hc := *httpClient
	hc.CheckRedirect = checkRedirect
	return &Client{hosts: withDefaults(hosts), http: &hc}
}

// Open opens pr on the service that serves remoteURL (https://host/owner/repo,
// ssh://git@host[:port]/owner/repo.git or git@host:owner/repo.git), taking
// Owner and Repo from the URL's path when pr leaves them empty. When an open
// pull request for the same branches exists, Open returns it: a job that
// is continued pushes again to the same branch.
func (c *Client) Open(ctx context.Context, remoteURL string, pr PullRequest) (Opened, error) {
	h, pr, err := c.prepare(remoteURL, pr)
	if err != nil {
		return Opened{}, fmt.Errorf("open pull request: %w", err)
	}
	svc := c.service(h)
	o, err := svc.create(ctx, pr)
	if errors.Is(err, ErrAlreadyExists) {
		o, err = existing(ctx, svc, pr, err)
	}
	if err != nil {
		return Opened{}, fmt.Errorf("open pull request on %s (%s): %w", h.Host, h.Kind, err)
	}
	return o, nil
}

// existing returns the open pull request a create refused with exists.
func existing(ctx context.Context, svc service, pr PullRequest, exists error) (Opened, error) {
	o, found, err := svc.findOpen(ctx, pr)
	if err != nil {
		return Opened{}, fmt.Errorf("%w; look for the open one: %w", exists, err)
	}
	if !found {
		return Opened{}, fmt.Errorf("%w; no open one from %s into %s", exists, pr.Head, pr.Base)
	}
	return o, nil
}

// service is one API's way of opening and finding pull requests. create
// returns an error wrapping ErrAlreadyExists when the service says the pull
// request exists.
type service interface {
	create(ctx context.Context, pr PullRequest) (Opened, error)
	findOpen(ctx context.Context, pr PullRequest) (Opened, bool, error)
}

func (c *Client) service(h Host) service {
	ep := endpoint{http: c.http, base: strings.TrimRight(h.APIBase, "/"), token: h.Token}
	if h.Kind == KindGitea {
		return newGitea(ep)
	}
	return newGitHub(ep)
}

// prepare finds the Host for remoteURL, completes pr and checks both.
func (c *Client) prepare(remoteURL string, pr PullRequest) (Host, PullRequest, error) {
	host, path, err := splitRemote(remoteURL)
	if err != nil {
		return Host{}, pr, err
	}
	h, err := c.lookup(host)
	if err != nil {
		return Host{}, pr, err
	}
	if err := checkService(h); err != nil {
		return Host{}, pr, err
	}
	if pr, err = fillRepo(pr, path); err != nil {
		return Host{}, pr, err
	}
	return h, pr, checkPullRequest(pr)
}

// checkService refuses a Host that cannot be called safely.
func checkService(h Host) error {
	if h.Kind != KindGitHub && h.Kind != KindGitea {
		return fmt.Errorf("git host %q: unknown kind %q (want %q or %q)", h.Host, h.Kind, KindGitHub, KindGitea)
	}
	if h.Token == "" {
		return fmt.Errorf("%w %q: set AGENTBOX_GIT_TOKEN", ErrNoToken, h.Host)
	}
	if err := checkAPIBase(h.APIBase); err != nil {
		return fmt.Errorf("git host %q: %w", h.Host, err)
	}
	return nil
}

// lookup finds the Host serving host (host[:port], lower case): the one
// named exactly, else the only one with the same host name whatever its
// port (an ssh:// remote's port is not the web port).
func (c *Client) lookup(host string) (Host, error) {
	var same []Host
	for _, h := range c.hosts {
		if h.Host == host {
			return h, nil
		}
		if hostname(h.Host) == hostname(host) {
			same = append(same, h)
		}
	}
	if len(same) == 1 {
		return same[0], nil
	}
	name := hostname(host)
	return Host{}, fmt.Errorf("%w %q: add it to AGENTBOX_GIT_HOSTS, e.g. %q (GitHub Enterprise) or %q (Gitea, Forgejo)",
		ErrUnknownHost, host, "github="+name, "gitea="+name)
}

// fillRepo takes Owner and Repo from the remote's path where pr has none.
func fillRepo(pr PullRequest, path string) (PullRequest, error) {
	if pr.Owner != "" && pr.Repo != "" {
		return pr, nil
	}
	owner, repo, err := ownerRepo(path)
	if err != nil {
		return pr, err
	}
	if pr.Owner == "" {
		pr.Owner = owner
	}
	if pr.Repo == "" {
		pr.Repo = repo
	}
	return pr, nil
}

// checkPullRequest refuses a pull request the services would refuse, or
// whose names would not stay one segment of the API's path.
func checkPullRequest(pr PullRequest) error {
	if err := checkName("owner", pr.Owner); err != nil {
		return err
	}
	if err := checkName("repository", pr.Repo); err != nil {
		return err
	}
	switch {
	case pr.Head == "" || strings.HasPrefix(pr.Head, ":") || strings.HasSuffix(pr.Head, ":"):
		return fmt.Errorf("pull request head %q: want a branch or owner:branch", pr.Head)
	case pr.Base == "":
		return errors.New("pull request has no base branch")
	case strings.TrimSpace(pr.Title) == "":
		return errors.New("pull request has no title")
	}
	return nil
}

// headBranch splits a head ("branch" or "owner:branch") into the owner
// (defaulting to the repository's) and the branch.
func headBranch(pr PullRequest) (owner, branch string) {
	if o, b, ok := strings.Cut(pr.Head, ":"); ok {
		return o, b
	}
	return pr.Owner, pr.Head
}

package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

const (
	// giteaPage is how many pull requests one page of Gitea's list holds
	// (Gitea caps it at its MAX_RESPONSE_ITEMS, 50 by default).
	giteaPage = 20
	// giteaMaxPages bounds the search for an existing pull request.
	giteaMaxPages = 50
	// giteaDraft is the title prefix Gitea takes for work in progress.
	giteaDraft = "WIP: "
)

// gitea speaks the Gitea API, which Forgejo speaks too:
// POST /repos/{owner}/{repo}/pulls (repoCreatePullRequest).
type gitea struct{ ep endpoint }

func newGitea(ep endpoint) *gitea {
	ep.auth = "token " + ep.token
	ep.headers = map[string]string{"Accept": "application/json"}
	return &gitea{ep: ep}
}

// giteaCreate is the body of repoCreatePullRequest (CreatePullRequestOption).
type giteaCreate struct {
	Title string `json:"title"`
	Head  string `json:"head"`
	Base  string `json:"base"`
	Body  string `json:"body"`
}

func (g *gitea) create(ctx context.Context, pr PullRequest) (Opened, error) {
	in := giteaCreate{Title: giteaTitle(pr), Head: pr.Head, Base: pr.Base, Body: pr.Body}
	var out pull
	err := g.ep.do(ctx, http.MethodPost, repoPulls(pr), nil, in, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return Opened{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
	}
	if err != nil {
		return Opened{}, err
	}
	return out.opened()
}

// giteaTitle marks a draft the way Gitea does, by a WIP prefix, unless the
// title has one.
func giteaTitle(pr PullRequest) string {
	t := strings.ToUpper(pr.Title)
	if !pr.Draft || strings.HasPrefix(t, "WIP:") || strings.HasPrefix(t, "[WIP]") {
		return pr.Title
	}
	return giteaDraft + pr.Title
}

// findOpen pages through the open pull requests (Gitea's list has no head
// filter) for the one from pr's head into its base.
func (g *gitea) findOpen(ctx context.Context, pr PullRequest) (Opened, bool, error) {
	for page := 1; page <= giteaMaxPages; page++ {
		q := url.Values{"state": {"open"}, "page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(giteaPage)}}
		var pulls []pull
		if err := g.ep.do(ctx, http.MethodGet, repoPulls(pr), q, nil, &pulls); err != nil {
			return Opened{}, false, err
		}
		if o, found, err := match(pulls, pr); found || err != nil || len(pulls) == 0 {
			return o, found, err
		}
	}
	return Opened{}, false, nil
}

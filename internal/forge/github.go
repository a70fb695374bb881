package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// githubAPIVersion is the REST API version the requests are written for.
const githubAPIVersion = "2022-11-28"

// github speaks GitHub's REST API (github.com and GitHub Enterprise Server):
// https://docs.github.com/rest/pulls/pulls#create-a-pull-request.
type github struct{ ep endpoint }

func newGitHub(ep endpoint) *github {
	ep.auth = "Bearer " + ep.token
	ep.headers = map[string]string{
		"Accept":               "application/vnd.github+json",
		"X-GitHub-Api-Version": githubAPIVersion,
	}
	return &github{ep: ep}
}

// githubCreate is the body of "Create a pull request".
type githubCreate struct {
	Title string `json:"title"`
	Head  string `json:"head"`
	Base  string `json:"base"`
	Body  string `json:"body"`
	Draft bool   `json:"draft"`
}

func (g *github) create(ctx context.Context, pr PullRequest) (Opened, error) {
	in := githubCreate{Title: pr.Title, Head: pr.Head, Base: pr.Base, Body: pr.Body, Draft: pr.Draft}
	var out pull
	err := g.ep.do(ctx, http.MethodPost, repoPulls(pr), nil, in, &out)
	if githubExists(err) {
		return Opened{}, fmt.Errorf("%w: %w", ErrAlreadyExists, err)
	}
	if err != nil {
		return Opened{}, err
	}
	return out.opened()
}

// githubExists recognises GitHub's refusal of a second pull request for
// the same branches: 422 with "A pull request already exists for o:b.".
func githubExists(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
		return false
	}
	for _, s := range append([]string{ae.Message}, ae.Errors...) {
		if strings.Contains(strings.ToLower(s), "a pull request already exists") {
			return true
		}
	}
	return false
}

// findOpen lists the open pull requests from pr's head into its base;
// GitHub filters by head in the form owner:branch.
func (g *github) findOpen(ctx context.Context, pr PullRequest) (Opened, bool, error) {
	owner, branch := headBranch(pr)
	q := url.Values{"state": {"open"}, "head": {owner + ":" + branch}, "base": {pr.Base}}
	var pulls []pull
	if err := g.ep.do(ctx, http.MethodGet, repoPulls(pr), q, nil, &pulls); err != nil {
		return Opened{}, false, err
	}
	return match(pulls, pr)
}

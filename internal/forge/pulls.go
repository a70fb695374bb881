package forge

import (
	"fmt"
	"net/url"
)

// pull is the part of a pull request, in either API's JSON, that Open uses.
type pull struct {
	HTMLURL string `json:"html_url"`
	Number  int    `json:"number"`
	Head    struct {
		Ref string `json:"ref"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// opened checks what a service said it opened: a web URL and a number.
func (p pull) opened() (Opened, error) {
	u, err := url.Parse(p.HTMLURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Opened{}, fmt.Errorf("response has no web URL for the pull request (html_url %q)", p.HTMLURL)
	}
	if p.Number <= 0 {
		return Opened{}, fmt.Errorf("response has no pull request number (number %d)", p.Number)
	}
	return Opened{URL: p.HTMLURL, Number: p.Number}, nil
}

// match finds the pull request among pulls from pr's head branch into pr's
// base.
func match(pulls []pull, pr PullRequest) (Opened, bool, error) {
	_, branch := headBranch(pr)
	for _, p := range pulls {
		if p.Head.Ref == branch && p.Base.Ref == pr.Base {
			o, err := p.opened()
			return o, err == nil, err
		}
	}
	return Opened{}, false, nil
}

package openai_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"testing"
)

// rewriter sends every request to target instead, showing its body to observe.
type rewriter struct {
	target  *url.URL
	observe func([]byte)
}

func rewrite(t *testing.T, target string, observe func([]byte)) http.RoundTripper {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return rewriter{target: u, observe: observe}
}

func (r rewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.observe(body)
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.URL.Scheme, out.URL.Host = r.target.Scheme, r.target.Host
	out.Host = r.target.Host
	return http.DefaultTransport.RoundTrip(out)
}

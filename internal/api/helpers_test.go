package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/wire"
)

// req describes one test request.
type req struct {
	method, path, body string
	header             map[string]string
	noAuth             bool
}

// envFor wraps a server that is not an apitest one for do.
func envFor(srv *httptest.Server) *apitest.Env { return &apitest.Env{Server: srv, URL: srv.URL} }

// do sends r to the test server (with the test token unless noAuth) and
// returns the response with its body read.
func do(t *testing.T, e *apitest.Env, r req) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, e.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if !r.noAuth {
		hr.Header.Set("Authorization", "Bearer "+apitest.Token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	if h := r.header["Host"]; h != "" {
		hr.Host = h
	}
	resp, err := noRedirects.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// noRedirects is the tests' client: redirects are answers to check.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// decode unmarshals b into a T, failing the test if it is not one.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// wantError checks an error response: status, JSON content type and code.
func wantError(t *testing.T, resp *http.Response, b []byte, status int, code string) wire.ErrorDetail {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	e := decode[wire.ErrorResponse](t, b)
	if e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("error = %+v, want code %s and a message", e.Error, code)
	}
	return e.Error
}

func submit(t *testing.T, e *apitest.Env, body string) wire.SubmitResponse {
	t.Helper()
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	return decode[wire.SubmitResponse](t, b)
}

func getJob(t *testing.T, e *apitest.Env, id string) wire.Job {
	t.Helper()
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, b)
	}
	return decode[wire.Job](t, b)
}

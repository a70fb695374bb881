package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
)

const (
	// maxResponse caps a response body read from a service: a pull
	// request's JSON is some 10-30 KiB, a page of them some 20 times that.
	maxResponse = 4 << 20
	// maxMessage caps what of a service's error text reaches an error.
	maxMessage = 500
	userAgent  = "agentbox"
)

// APIError is a service's refusal: the HTTP status and what its error body
// said (GitHub's {message, errors, documentation_url}; Gitea's {message}).
// The texts are cut short and never hold the token.
type APIError struct {
	Status           int
	Message          string
	Errors           []string
	DocumentationURL string
}

// Error says the status, the message and each error.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.Status)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if len(e.Errors) > 0 {
		b.WriteString(" (" + strings.Join(e.Errors, "; ") + ")")
	}
	if e.DocumentationURL != "" {
		b.WriteString(", see " + e.DocumentationURL)
	}
	return b.String()
}

// endpoint is one service's API: where it is, how to authenticate.
type endpoint struct {
	http    *http.Client
	base    string // APIBase without a trailing slash
	token   string
	auth    string            // the Authorization header's value
	headers map[string]string // sent with every request
}

// repoPulls is the API path of a repository's pull requests.
func repoPulls(pr PullRequest) string {
	return "/repos/" + url.PathEscape(pr.Owner) + "/" + url.PathEscape(pr.Repo) + "/pulls"
}

// do sends a request with in as its JSON body (when not nil) and decodes a
// 2xx response into out; any other status is an *APIError.
func (e endpoint) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req, err := e.request(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := readCapped(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s: %w", method, path, e.apiError(resp.StatusCode, body))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

func (e endpoint) request(ctx context.Context, method, path string, query url.Values, in any) (*http.Request, error) {
	u := e.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", e.auth)
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

// readCapped reads a body of at most maxResponse bytes.
func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxResponse+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxResponse {
		return nil, fmt.Errorf("larger than %d bytes", maxResponse)
	}
	return b, nil
}

// errorBody is the error shape both APIs share; GitHub adds errors and
// documentation_url. An entry of errors is an object or, rarely, a string.
type errorBody struct {
	Message          string            `json:"message"`
	Errors           []json.RawMessage `json:"errors"`
	DocumentationURL string            `json:"documentation_url"`
}

type errorItem struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// apiError reads an error response; a body that is not JSON becomes the
// message.
func (e endpoint) apiError(status int, body []byte) *APIError {
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil {
		eb = errorBody{Message: string(body)}
	}
	ae := &APIError{Status: status, Message: e.clean(eb.Message), DocumentationURL: e.clean(eb.DocumentationURL)}
	if ae.Message == "" {
		ae.Message = http.StatusText(status)
	}
	for _, raw := range eb.Errors {
		if s := e.clean(errorText(raw)); s != "" {
			ae.Errors = append(ae.Errors, s)
		}
	}
	return ae
}

// errorText is one entry of GitHub's errors: its message, else what
// resource, field and code say.
func errorText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var it errorItem
	if json.Unmarshal(raw, &it) != nil {
		return ""
	}
	if it.Message != "" {
		return it.Message
	}
	return strings.TrimSpace(strings.Join([]string{it.Resource, it.Field, it.Code}, " "))
}

// clean makes a service's text fit for an error: the token cut out (a
// service might echo it), control characters gone, at most maxMessage bytes.
func (e endpoint) clean(s string) string {
	if e.token != "" {
		s = strings.ReplaceAll(s, e.token, "[token]")
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		s = strings.ToValidUTF8(s[:maxMessage], "") + "…"
	}
	return s
}

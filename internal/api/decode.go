package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// decodeJSON reads exactly one JSON value into v from a body of at most max
// bytes. Every way a body can be wrong is a 400 naming the problem, except
// its size (413). The Content-Type is not checked: plain `curl -d` sends a
// form type, and browsers' cross-site posts are refused by auth (or, without
// auth, by the Origin check).
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	if r.ContentLength > max {
		return &http.MaxBytesError{Limit: max}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("request body must hold a single JSON object; found data after it")
	}
	return nil
}

func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body is not valid JSON: it ends early")
	case errors.As(err, &se):
		return badRequest("request body is not valid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("request body must be a JSON object, not %s", te.Value)
		}
		return badRequest("field %q must be %s, not %s", te.Field, typeName(te.Type), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("request body: %v", err)
}

// queryInt reads an optional non-negative integer query parameter.
func queryInt(r *http.Request, name string, def int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, badRequest("query parameter %s must be an integer, not %q", name, s)
	}
	if n < 0 {
		return 0, errorf(http.StatusUnprocessableEntity, CodeValidation, "query parameter %s must not be negative", name)
	}
	return n, nil
}

// pathID returns the job id of the request path.
func pathID(r *http.Request) string { return r.PathValue("id") }

// idempotencyKey returns the Idempotency-Key header.
func idempotencyKey(r *http.Request) string { return r.Header.Get("Idempotency-Key") }

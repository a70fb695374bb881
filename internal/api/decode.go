package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/wire"
	"reflect"
)

// decodeJSON reads exactly one JSON value into v from a body of at most max
// bytes. Every way a body can be wrong is a 400 naming the problem, except
// its size (413). The Content-Type is not checked: plain `curl -d` sends a
// form type, and browsers' cross-site posts are refused by auth (or, without
// auth, by the Origin check).
//
// Text must be Unicode as sent: encoding/json would replace bytes that are
// not UTF-8, and escapes of lone UTF-16 surrogates ("\udc00"), with U+FFFD,
// and the job would run a task other than the one submitted.
func decodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	if r.ContentLength > max {
		return &http.MaxBytesError{Limit: max}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		return decodeError(err)
	}
	return decodeBody(body, v)
}

// decodeBody decodes body, a whole request body, into v (see decodeJSON).
func decodeBody(body []byte, v any) error {
	if err := checkUnicode(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		return badRequest("request body must hold a single JSON object; found data after it")
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	return checkSurrogates(body)
}

// checkUnicode refuses a body that is not UTF-8, naming the first bad byte.
func checkUnicode(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	at := 0
	for at < len(body) {
		r, n := utf8.DecodeRune(body[at:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		at += n
	}
	return badRequest("request body is not valid UTF-8: byte %d (0x%02x) is not part of a UTF-8 character; send text as UTF-8", at, body[at])
}

// checkSurrogates refuses \u escapes of UTF-16 surrogates that are not a
// high one followed by a low one. body is valid JSON, so every backslash
// starts an escape inside a string and \u has four hex digits.
func checkSurrogates(body []byte) error {
	for i := 0; i < len(body); i++ {
		switch r := escapedRune(body, i); {
		case body[i] != '\\':
		case r < 0:
			i++ // a two-byte escape; its second byte may be a backslash
		case !utf16.IsSurrogate(r):
			i += 5
		case r < 0xdc00 && escapedRune(body, i+6) >= 0xdc00 && escapedRune(body, i+6) <= 0xdfff:
			i += 11 // a pair: one character outside the BMP
		default:
			return badRequest("request body is not valid Unicode: the escape %s at byte %d is half of a UTF-16 surrogate pair; escape a character outside the BMP as a pair (e.g. \\ud83d\\ude00) or send it as UTF-8", body[i:i+6], i)
		}
	}
	return nil
}

// escapedRune is the value of the \uXXXX escape at body[i], or -1 if none
// starts there.
func escapedRune(body []byte, i int) rune {
	if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
		return -1
	}
	return hexRune(body[i+2 : i+6])
}

// hexRune is the value of four hex digits (checked by the JSON decoder).
func hexRune(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 16)
	return rune(n)
}

func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var fe *egress.FieldError
	switch {
	case bodyFailure(err):
		return err
	case errors.As(err, &fe):
		return policyError(fe)
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
		msg := fmt.Sprintf("field %q must be %s, not %s", te.Field, typeName(te.Type), te.Value)
		return &apiError{status: http.StatusBadRequest, code: wire.CodeBadRequest, msg: msg, fields: []wire.FieldProblem{{Field: te.Field, Message: msg}}}
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
		return 0, errorf(http.StatusUnprocessableEntity, wire.CodeValidation, "query parameter %s must not be negative", name)
	}
	return n, nil
}

// pathID returns the job id of the request path.
func pathID(r *http.Request) string { return r.PathValue("id") }

// idempotencyKey returns the Idempotency-Key header.
func idempotencyKey(r *http.Request) string { return r.Header.Get("Idempotency-Key") }

// typeName describes a Go type the way a client writes the value.
func typeName(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[wire.Duration]():
		return `a duration such as "30m" or a number of seconds`
	case reflect.TypeFor[wire.ByteSize]():
		return `a size such as "2g" or a number of bytes`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	case reflect.Slice:
		return "an array"
	}
	return t.String()
}

package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// checkKeys refuses a body, valid JSON decoded into a value of type t,
// that gives one key twice in an object: encoding/json keeps the last,
// and matches a struct's fields whatever their case, so
// {"isolation":"gvisor","Isolation":"container"} would run under
// container while a proxy or a log reading "isolation" saw gvisor. Keys
// of a struct's object are compared case-insensitively, as encoding/json
// matches them; a map's keys exactly.
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return keysOnce(dec, t)
}

// keysOnce reads one value from dec, of type t (nil where unknown).
func keysOnce(dec *json.Decoder, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return decodeError(err)
	}
	switch tok {
	case json.Delim('{'):
		return objectKeysOnce(dec, t)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := keysOnce(dec, elem); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

func objectKeysOnce(dec *json.Decoder, t reflect.Type) error {
	isStruct := t != nil && t.Kind() == reflect.Struct
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return decodeError(err)
		}
		key, _ := tok.(string)
		k := key
		if isStruct {
			k = foldKey(key)
		}
		if seen[k] {
			return badRequest("request body gives the key %q more than once in an object (keys are matched whatever their case); give each once", key)
		}
		seen[k] = true
		if err := keysOnce(dec, childType(t, key)); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// childType is the type of the value under key in an object decoded into
// t, or nil.
func childType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() != reflect.Struct:
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if f.IsExported() && foldKey(name) == foldKey(key) {
			return f.Type
		}
	}
	return nil
}

// foldKey is key folded as encoding/json folds a field's name (the Kelvin
// sign and the long s included).
func foldKey(key string) string { return strings.ToLower(strings.ToUpper(key)) }

package netpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// UnmarshalJSON reads a policy, refusing unknown fields, more than
// MaxEntries entries before it reads them, and a malformed entry, each as
// a *FieldError naming where ("allow[3]"), so the API's 400 names the field
// as it does for a policy Check refuses.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var raw struct {
		Mode    string            `json:"mode"`
		Allow   []json.RawMessage `json:"allow"`
		Deny    []json.RawMessage `json:"deny"`
		Presets []string          `json:"presets"`
		Secrets []string          `json:"secrets"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &FieldError{te.Field, fmt.Errorf("must be %s, not %s", jsonKind(te.Field), te.Value)}
		}
		return &FieldError{"", errors.New(`want a policy: {"mode": ..., "allow": [...], "deny": [...], "presets": [...], "secrets": [...]}; ` + err.Error())}
	}
	if n := len(raw.Allow) + len(raw.Deny) + len(raw.Presets) + len(raw.Secrets); n > MaxEntries {
		return &FieldError{"allow", fmt.Errorf("%d entries: at most %d in allow, deny, presets and secrets together", n, MaxEntries)}
	}
	out := Policy{Mode: raw.Mode, Presets: raw.Presets, Secrets: raw.Secrets}
	var err error
	if out.Allow, err = rules("allow", raw.Allow); err != nil {
		return err
	}
	if out.Deny, err = rules("deny", raw.Deny); err != nil {
		return err
	}
	*p = out
	return nil
}

func rules(field string, raw []json.RawMessage) ([]Rule, error) {
	if raw == nil {
		return nil, nil
	}
	out := make([]Rule, len(raw))
	for i, m := range raw {
		if err := out[i].UnmarshalJSON(m); err != nil {
			return nil, &FieldError{fmt.Sprintf("%s[%d]", field, i), err}
		}
	}
	return out, nil
}

func jsonKind(field string) string {
	switch field {
	case "mode":
		return "a string: none, allow or open"
	case "allow", "deny":
		return "an array of entries"
	}
	return "an array of names"
}

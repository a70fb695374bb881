package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/llm"
)

// schema is a tool's input: a JSON object of typed properties. It is both
// what the model is shown (as JSON Schema) and what its input is checked
// against, so the two cannot drift apart.
type schema struct {
	props    []prop
	required []string
}

// prop is one property. Type is "string", "integer", "number", "boolean",
// or "array" for a point: two whole numbers [x, y].
type prop struct {
	Name        string
	Type        string
	Description string
	Enum        []string
	Min, Max    *int64
}

func object(required []string, props ...prop) *schema {
	return &schema{props: props, required: required}
}

func str(name, desc string) prop     { return prop{Name: name, Type: "string", Description: desc} }
func boolean(name, desc string) prop { return prop{Name: name, Type: "boolean", Description: desc} }
func enum(name, desc string, values ...string) prop {
	return prop{Name: name, Type: "string", Description: desc, Enum: values}
}

func integer(name, desc string, lo, hi int64) prop {
	p := prop{Name: name, Type: "integer", Description: desc, Min: &lo}
	if hi > 0 {
		p.Max = &hi
	}
	return p
}

// number is a property that may have a fraction, between lo and hi.
func number(name, desc string, lo, hi int64) prop {
	p := integer(name, desc, lo, hi)
	p.Type = "number"
	return p
}

// point is a property of two whole numbers, [x, y], each at least 0.
func point(name, desc string) prop {
	return prop{Name: name, Type: "array", Description: desc}
}

// MarshalJSON writes the schema with its properties in declared order: the
// order a model reads them in is the order they matter in.
func (s *schema) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i, p := range s.props {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(p.Name)
		body, err := json.Marshal(p.json())
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		b.Write(body)
	}
	req, _ := json.Marshal(append([]string{}, s.required...))
	fmt.Fprintf(&b, `},"required":%s,"additionalProperties":false}`, req)
	return b.Bytes(), nil
}

type propJSON struct {
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Enum        []string  `json:"enum,omitempty"`
	Minimum     *int64    `json:"minimum,omitempty"`
	Maximum     *int64    `json:"maximum,omitempty"`
	Items       *propJSON `json:"items,omitempty"`
	MinItems    int       `json:"minItems,omitempty"`
	MaxItems    int       `json:"maxItems,omitempty"`
}

func (p prop) json() propJSON {
	j := propJSON{Type: p.Type, Description: p.Description, Enum: p.Enum, Minimum: p.Min, Maximum: p.Max}
	if p.Type == "array" {
		zero := int64(0)
		j.Items = &propJSON{Type: "integer", Description: "pixels", Minimum: &zero}
		j.MinItems, j.MaxItems = 2, 2
	}
	return j
}

// spec builds a tool's llm.Tool; it panics on a schema that cannot be
// encoded, which is a programming error caught by any test.
func spec(name, description string, s *schema) llm.Tool {
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: %s schema: %v", name, err))
	}
	return llm.Tool{Name: name, Description: description, InputSchema: raw}
}

func (s *schema) find(name string) (prop, bool) {
	i := slices.IndexFunc(s.props, func(p prop) bool { return p.Name == name })
	if i < 0 {
		return prop{}, false
	}
	return s.props[i], true
}

// decode checks input against the schema and then fills dst. The error it
// returns is written for the model: every problem found, in one line each.
func (s *schema) decode(input json.RawMessage, dst any) error {
	fields, err := s.fields(input)
	if err != nil {
		return err
	}
	var problems []string
	for _, name := range sortedKeys(fields) {
		p, ok := s.find(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown field %q", name))
			continue
		}
		if msg := p.check(fields[name]); msg != "" {
			problems = append(problems, msg)
		}
	}
	for _, name := range s.required {
		if _, ok := fields[name]; !ok {
			problems = append(problems, fmt.Sprintf("missing required field %q", name))
		}
	}
	if len(problems) > 0 {
		return inputError(strings.Join(problems, "; "))
	}
	clean, _ := json.Marshal(fields)
	if err := json.Unmarshal(clean, dst); err != nil {
		return inputError(err.Error())
	}
	return nil
}

// fields splits the input object into its fields, dropping explicit nulls:
// models often send null for an optional field they mean to leave out.
func (s *schema) fields(input json.RawMessage) (map[string]json.RawMessage, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	var fields map[string]json.RawMessage
	if input[0] != '{' || json.Unmarshal(input, &fields) != nil {
		return nil, inputError(fmt.Sprintf("the input must be a JSON object, got %s", clip(string(input), 80)))
	}
	for k, v := range fields {
		if string(v) == "null" {
			delete(fields, k)
		}
	}
	return fields, nil
}

// check returns what is wrong with one field's value, or "".
func (p prop) check(raw json.RawMessage) string {
	got := jsonKind(raw)
	switch p.Type {
	case "string":
		if got != "string" {
			return fmt.Sprintf("field %q must be a string, got %s", p.Name, got)
		}
		var v string
		_ = json.Unmarshal(raw, &v)
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
			return fmt.Sprintf("field %q must be one of %s, got %q", p.Name, strings.Join(quoteAll(p.Enum), ", "), v)
		}
	case "boolean":
		if got != "boolean" {
			return fmt.Sprintf("field %q must be true or false, got %s", p.Name, got)
		}
	case "integer":
		return p.checkInt(raw, got)
	case "number":
		return p.checkNumber(raw, got)
	case "array":
		return p.checkPoint(raw)
	}
	return ""
}

func (p prop) checkNumber(raw json.RawMessage, got string) string {
	n, err := strconv.ParseFloat(string(raw), 64)
	if got != "number" || err != nil {
		return fmt.Sprintf("field %q must be a number, got %s %s", p.Name, got, clip(string(raw), 40))
	}
	if p.Min != nil && n < float64(*p.Min) || p.Max != nil && n > float64(*p.Max) {
		return fmt.Sprintf("field %q must be between %s, got %g", p.Name, p.bounds(), n)
	}
	return ""
}

// checkPoint checks [x, y]: two whole numbers, not negative.
func (p prop) checkPoint(raw json.RawMessage) string {
	var xy []json.RawMessage
	if jsonKind(raw) != "array" || json.Unmarshal(raw, &xy) != nil || len(xy) != 2 {
		return fmt.Sprintf("field %q must be [x, y], two whole numbers, got %s", p.Name, clip(string(raw), 40))
	}
	for _, c := range xy {
		if n, err := strconv.ParseInt(string(c), 10, 64); err != nil || n < 0 {
			return fmt.Sprintf("field %q must be [x, y], two whole numbers of pixels from the top-left corner, got %s", p.Name, clip(string(raw), 40))
		}
	}
	return ""
}

func (p prop) checkInt(raw json.RawMessage, got string) string {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if got != "number" || err != nil {
		return fmt.Sprintf("field %q must be a whole number, got %s %s", p.Name, got, clip(string(raw), 40))
	}
	if p.Min != nil && n < *p.Min || p.Max != nil && n > *p.Max {
		return fmt.Sprintf("field %q must be between %s, got %d", p.Name, p.bounds(), n)
	}
	return ""
}

func (p prop) bounds() string {
	if p.Max == nil {
		return fmt.Sprintf("%d and any larger number", *p.Min)
	}
	return fmt.Sprintf("%d and %d", *p.Min, *p.Max)
}

// usage is a one-line reminder of the input's shape, shown with input errors.
func (s *schema) usage() string {
	parts := make([]string, len(s.props))
	for i, p := range s.props {
		typ := p.Type
		if typ == "array" {
			typ = "[x, y]"
		}
		parts[i] = fmt.Sprintf("%q: %s", p.Name, typ)
		if slices.Contains(s.required, p.Name) {
			parts[i] += " (required)"
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case '{':
		return "object"
	case '[':
		return "array"
	case 'n':
		return "null"
	}
	return "number"
}

// inputError is an input the model got wrong; its text is shown to it.
type inputError string

func (e inputError) Error() string { return string(e) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// clip shortens s to n bytes for quoting in a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

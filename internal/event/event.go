// Package event owns the vocabulary of a job's event log: the type names,
// one payload struct per type, and Decode, which turns a stored payload back
// into its struct. Writers (jobs, agent) emit these structs and readers
// (resume, the API's stream, the CLI's printers) decode them, so a field
// renamed on one side is a compile error instead of a resume that silently
// loses steps.
//
// The payloads' JSON is the wire format of GET /v1/jobs/{id}/events and of
// the stored logs. Each struct declares its fields in the alphabetical order
// of their JSON names: the encoding is then byte for byte what the untyped
// maps written before this package produced (encoding/json sorts map keys).
package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Payload is the payload of one type of event. EventType names the type,
// so an emitter cannot pair a payload with the wrong type.
type Payload interface {
	EventType() string
}

// ErrUnknownType means an event's type is none of this package's: a newer
// server's, or a test's. Clients show such events generically.
var ErrUnknownType = errors.New("unknown event type")

// payloads holds a zero payload of every type, in the order Types lists
// them.
var payloads = []Payload{
	State{}, Sandbox{}, Command{}, Output{}, Exit{}, Log{}, Deleted{}, Git{}, Message{}, Checkpoint{},
	Network{}, NetworkPolicy{},
	Model{}, ToolCall{}, ToolResult{}, Notice{}, Condensation{},
}

// byType is the struct of each type's payload, which Decode fills.
var byType = func() map[string]reflect.Type {
	m := make(map[string]reflect.Type, len(payloads))
	for _, p := range payloads {
		m[p.EventType()] = reflect.TypeOf(p)
	}
	return m
}()

// Types returns a zero payload of every known event type, jobs' first,
// then the agent's.
func Types() []Payload {
	return append([]Payload(nil), payloads...)
}

// Decode returns the payload of an event of type typ as its struct: a
// value (State, Model, ...), never a pointer, so callers switch on
// `case event.Model:`. An unknown type is ErrUnknownType; a payload that is
// not its type's JSON is an error too.
func Decode(typ string, payload []byte) (Payload, error) {
	t, ok := byType[typ]
	if !ok {
		return nil, fmt.Errorf("decode event: %w %q", ErrUnknownType, typ)
	}
	p := reflect.New(t)
	if err := json.Unmarshal(payload, p.Interface()); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", typ, err)
	}
	return p.Elem().Interface().(Payload), nil
}

// As decodes an event's payload as T when typ is T's type. ok is false for
// an event of another type or a payload that does not decode.
func As[T Payload](typ string, payload []byte) (v T, ok bool) {
	if v.EventType() != typ {
		return v, false
	}
	if json.Unmarshal(payload, &v) != nil {
		var zero T
		return zero, false
	}
	return v, true
}

// Marshal encodes p as a stored event: its type and its JSON payload.
func Marshal(p Payload) (typ string, payload json.RawMessage, err error) {
	b, err := json.Marshal(p)
	if err != nil {
		return p.EventType(), nil, fmt.Errorf("encode %s event: %w", p.EventType(), err)
	}
	return p.EventType(), b, nil
}

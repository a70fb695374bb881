package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"time"

	dockerunits "github.com/docker/go-units"
)

// Duration is a time span on the wire. It decodes from a Go duration string
// ("90s", "30m", "1h30m") or a number of seconds (1800, 0.5) and encodes as a
// duration string ("30m0s").
type Duration time.Duration

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if s, ok := jsonString(b); ok {
		v, err := time.ParseDuration(s)
		if err != nil {
			return typeError(b, d)
		}
		*d = Duration(v)
		return nil
	}
	secs, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.Abs(secs) > float64(math.MaxInt64)/1e9 {
		return typeError(b, d)
	}
	*d = Duration(math.Round(secs * 1e9))
	return nil
}

// ByteSize is an amount of memory on the wire. It decodes from a size string
// ("512m", "2g", "2GiB") or an integer number of bytes and encodes as bytes.
type ByteSize int64

// UnmarshalJSON accepts a size string or an integer number of bytes.
func (n *ByteSize) UnmarshalJSON(b []byte) error {
	if s, ok := jsonString(b); ok {
		v, err := dockerunits.RAMInBytes(s) // units.ParseSize's reading, without its message
		if err != nil {
			return typeError(b, n)
		}
		*n = ByteSize(v)
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return typeError(b, n)
	}
	*n = ByteSize(v)
	return nil
}

// jsonString reports whether b is a JSON string and returns its value.
func jsonString(b []byte) (string, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return "", false
	}
	return s, true
}

// typeError makes the decoder report the field's path with the bad value.
func typeError(b []byte, target any) error {
	v := string(bytes.TrimSpace(b))
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return &json.UnmarshalTypeError{Value: v, Type: reflect.TypeOf(target).Elem()}
}

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// repeatTracker notices the model making the same failing call again and
// again, which otherwise burns the step budget on a loop.
type repeatTracker struct {
	last  string
	count int
}

// observe records a call and its outcome; it returns a note for the model
// when the same call has failed limit times in a row.
func (r *repeatTracker) observe(c llm.Block, failed bool, limit int) string {
	sig := c.Name + ":" + canonical(c.Input)
	if !failed {
		r.last, r.count = "", 0
		return ""
	}
	if sig == r.last {
		r.count++
	} else {
		r.last, r.count = sig, 1
	}
	if r.count < limit {
		return ""
	}
	return fmt.Sprintf("[agentbox] This exact %s call has now failed %d times in a row with the same input. "+
		"Repeating it will not help: read the error, inspect the files or environment, and try a different approach.", c.Name, r.count)
}

// canonical re-encodes JSON so that key order and spacing do not matter.
func canonical(in json.RawMessage) string {
	var v any
	if json.Unmarshal(in, &v) != nil {
		return string(bytes.TrimSpace(in))
	}
	b, _ := json.Marshal(v)
	return string(b)
}

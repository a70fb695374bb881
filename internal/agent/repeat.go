package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/llm"
)

// repeatTracker notices the model making the same failing call with the
// same error again and again (typically: run the tests, read a file, run
// the same tests again), which otherwise burns the step budget on a loop.
// Calls in between do not reset it; only the same call succeeding does.
type repeatTracker struct {
	failing map[string]failure // by call signature
}

type failure struct {
	errSum [32]byte
	count  int
}

// maxTracked bounds the tracker's memory over a long job.
const maxTracked = 256

// observe records a call and its result; it returns a note for the model
// when the same call has failed the same way limit times.
func (r *repeatTracker) observe(c llm.Block, res tools.Result, limit int) string {
	sig := c.Name + ":" + canonical(c.Input)
	if !res.IsError {
		delete(r.failing, sig)
		return ""
	}
	if r.failing == nil || len(r.failing) >= maxTracked {
		r.failing = map[string]failure{}
	}
	sum := sha256.Sum256([]byte(res.Text))
	f := r.failing[sig]
	if f.errSum != sum {
		f = failure{errSum: sum}
	}
	f.count++
	r.failing[sig] = f
	if f.count < limit {
		return ""
	}
	return fmt.Sprintf("[agentbox] This exact %s call has now failed %d times with the same error. "+
		"Repeating it will not help: read the error, inspect the files or environment, and try a different approach.", c.Name, f.count)
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

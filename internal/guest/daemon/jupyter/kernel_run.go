package jupyter

import (
	"context"
	"encoding/json"
	"time"
)

// saveFunc saves an image into a new workspace file, trying the names
// name(0), name(1), ..., and returns its path (see outputs.saveOutput).
type saveFunc func(data []byte, name func(int) string) (string, error)

// outcome is how waiting for an execution ended.
type outcome int

const (
	finished outcome = iota // the kernel is idle again
	timedOut                // the deadline passed
	canceled                // the caller went away
	died                    // the kernel's process died, or the server said it restarted or died
	lost                    // the connection to the server broke
)

func (o outcome) String() string {
	return [...]string{"finished", "timed out", "canceled", "died", "lost"}[o]
}

// execution is one execute_request and what the kernel has said about it.
type execution struct {
	msgID   string
	col     *collector
	started bool // the kernel took the request
	idle    bool
	replied bool
	status  string // the execute_reply's status: ok, error or aborted
	count   int    // the execute_reply's execution count
	session string // the kernel's session, from its reply
}

// run sends code to the kernel and waits until the kernel is done with it,
// the deadline passes, ctx ends, or the kernel dies.
func (k *kernelState) run(ctx context.Context, code string, deadline time.Time, save saveFunc) (*execution, outcome, error) {
	id, err := k.conn.send(ctx, "shell", "execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]string{},
		"allow_stdin": false, "stop_on_error": true,
	})
	if err != nil {
		return nil, lost, err
	}
	x := &execution{msgID: id, col: newCollector(save)}
	return x, k.wait(ctx, x, deadline), nil
}

// wait reads the kernel's messages for x until it is done or something
// else ends the wait.
//
// A kernel whose process could not be identified cannot be watched for a
// kill, and a request sent to a killed one is answered by nothing (the
// server relays it to sockets no process reads, or to the kernel it
// restarted by itself, which does not know it): if such a kernel has not
// started on x within startWait, it is taken for dead, and runCode runs
// the code again in a fresh kernel rather than waiting out its timeout.
func (k *kernelState) wait(ctx context.Context, x *execution, deadline time.Time) outcome {
	c := k.conn
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	var unstarted <-chan time.Time
	if !k.proc.known() && k.startWait > 0 {
		t := time.NewTimer(k.startWait)
		defer t.Stop()
		unstarted = t.C
	}
	var grace <-chan time.Time
	for !x.idle || !x.replied {
		if x.idle && grace == nil {
			grace = time.After(replyGrace)
		}
		select {
		case m := <-c.msgs:
			if !x.handle(m) {
				return died
			}
		case <-c.done:
			return x.drain(c)
		case <-timer.C:
			return timedOut
		case <-ctx.Done():
			return canceled
		case <-tick.C:
			if !k.proc.alive() {
				return died
			}
		case <-grace:
			return finished // the outputs are complete; only the reply's count is missing
		case <-unstarted:
			if !x.started {
				return died
			}
		}
	}
	return finished
}

// drain handles the messages read before the connection broke.
func (x *execution) drain(c *kconn) outcome {
	for {
		select {
		case m := <-c.msgs:
			if !x.handle(m) {
				return died
			}
		default:
			if x.idle {
				return finished
			}
			return lost
		}
	}
}

// handle records one message; it returns false when the server says the
// kernel restarted or died.
func (x *execution) handle(m jmsg) bool {
	if m.Header.MsgType == "status" && m.ParentHeader.MsgID == "" {
		var s struct {
			State string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &s)
		return s.State != "restarting" && s.State != "dead"
	}
	if m.ParentHeader.MsgID != x.msgID {
		return true // another client's, or a background thread's
	}
	switch {
	case m.Channel == "shell" && m.Header.MsgType == "execute_reply":
		var r struct {
			Status         string `json:"status"`
			ExecutionCount int    `json:"execution_count"`
		}
		_ = json.Unmarshal(m.Content, &r)
		x.replied, x.status, x.count, x.session, x.started = true, r.Status, r.ExecutionCount, m.Header.Session, true
	case m.Channel != "iopub":
	case m.Header.MsgType == "status":
		var s struct {
			State string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &s)
		x.started = true
		x.idle = x.idle || s.State == "idle"
	default:
		x.started = true
		x.col.add(m)
	}
	return true
}

// reply waits for the shell reply to request id.
func (c *kconn) reply(ctx context.Context, id string) (jmsg, error) {
	for {
		select {
		case m := <-c.msgs:
			if m.Channel == "shell" && m.ParentHeader.MsgID == id {
				return m, nil
			}
		case <-c.done:
			return jmsg{}, c.broken()
		case <-ctx.Done():
			return jmsg{}, ctx.Err()
		}
	}
}

// Package jupyter owns the sandbox's Jupyter notebook server, as a service
// for the guest's supervisor, and the one persistent Python (IPython) kernel
// the host runs code in through it (POST /kernel/execute).
//
// The kernel is started on first use and kept; a kernel that died is
// replaced, and the answer says so, since the code's earlier state is gone
// with it. Calls are serialized. Each opens its own WebSocket to the kernel
// (a few milliseconds), so nothing needs reading between calls and a dead
// kernel's connection is never reused; the guest also watches the kernel's
// process, which catches a kill at once.
//
// A call's work is bounded so that the host's client, which allows the
// code's timeout plus guest.KernelCallMargin, always gets an answer:
// starting the server and kernel (guest.KernelPrepareTimeout), then the
// code (its own timeout, counted from when the kernel is ready), then
// interrupting it and replacing a kernel that would not stop
// (guest.KernelSettleTimeout). Waiting for the call's turn is not bounded,
// but ends when the caller leaves.
package jupyter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/proc"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

const (
	// kernelStartTimeout bounds starting a kernel and seeing it answer.
	kernelStartTimeout = 2 * time.Minute
	// defaultInterruptGrace is how long interrupted code has to stop before
	// the kernel is restarted.
	defaultInterruptGrace = 5 * time.Second
	// probeTimeout bounds the first request to a kernel.
	probeTimeout = 30 * time.Second
	// replyGrace is how long the execute_reply may trail the kernel's idle
	// status: the two come on different channels.
	replyGrace = 2 * time.Second
	// restartTries and restartPause pace the retries of a failed restart.
	restartTries = 10
	restartPause = 500 * time.Millisecond
	// watchEvery is how often the kernel's process is checked while code runs.
	watchEvery = 500 * time.Millisecond
	// defaultStartWait is how long a kernel whose process is not identified
	// has to take a request (its busy status) before it is taken for dead.
	defaultStartWait = 30 * time.Second
)

// Why a kernel was (re)started, as guest.KernelResult.Restarted says it.
const (
	lostState      = " Variables, imports and definitions from earlier calls are gone."
	noteDied       = "The Python kernel had died since the last call (killed, or out of memory) and was restarted." + lostState
	noteGone       = "The Python kernel was gone (the notebook server had restarted) and a new one was started." + lostState
	noteDiedDuring = "The Python kernel died while running this code (killed, or out of memory) and was restarted." + lostState
	noteOOM        = "The Python kernel was killed for using too much memory while running this code and was restarted." + lostState
	noteHung       = "The code did not stop when interrupted, so the Python kernel was restarted." + lostState
	noteLost       = "The connection to the Python kernel broke, so the kernel was restarted." + lostState
)

// kernelState is the guest's one kernel. Calls are serialized by turn,
// which guards the rest.
type kernelState struct {
	// turn is held by the call under way: a one-slot channel rather than a
	// mutex, so that a call waiting its turn gives up when its caller does.
	turn chan struct{}
	http *http.Client
	log  *slog.Logger
	// id is the kernel's id on the notebook server; "" before the first.
	id string
	// proc is the kernel's process, found when it started.
	proc kproc
	// session is the kernel's own session id, which its replies carry; a
	// kernel the server restarted behind our back has another.
	session string
	// conn is the connection of the call under way.
	conn *kconn
	// watch says whether to look for the kernel's process (tests whose
	// kernel is fake turn it off).
	watch bool
	// grace is how long interrupted code has to stop; prepareTime and
	// settleTime bound a call's work before and after its code; startWait
	// is how long a kernel whose process is not identified may take to
	// start on a request.
	grace, prepareTime, settleTime, startWait time.Duration
}

// newKernelState is a Server's one kernel, not started until first used.
func newKernelState(log *slog.Logger) *kernelState {
	return &kernelState{
		turn: make(chan struct{}, 1), http: newJupyterClient(), log: log, watch: true,
		grace: defaultInterruptGrace, prepareTime: guest.KernelPrepareTimeout, settleTime: guest.KernelSettleTimeout,
		startWait: defaultStartWait,
	}
}

func checkKernelRequest(req guest.KernelRequest) error {
	switch {
	case req.Code == "":
		return guest.Errorf(guest.CodeBadRequest, "kernel: code is empty")
	case len(req.Code) > maxKernelCode:
		return guest.Errorf(guest.CodeTooLarge, "kernel: code is %d bytes, over the limit of %d; write it to a file and run that", len(req.Code), maxKernelCode)
	case req.TimeoutMS < 0:
		return guest.Errorf(guest.CodeBadRequest, "kernel: timeout_ms must not be negative")
	}
	return nil
}

// serviceError reports an infrastructure failure as a guest.CodeService error.
func serviceError(err error) error {
	var e *guest.Error
	if errors.As(err, &e) {
		return e
	}
	return guest.Errorf(guest.CodeService, "kernel: %v", err)
}

// execute runs req's code in the kernel, starting or replacing the kernel
// as needed. An error means the notebook server could not be used, or the
// caller left before the code was sent.
func (k *kernelState) execute(ctx context.Context, j jupyter, req guest.KernelRequest, save saveFunc) (guest.KernelResult, error) {
	if err := k.lock(ctx); err != nil {
		return guest.KernelResult{}, err
	}
	defer k.unlock()
	defer k.disconnect()
	prep, cancel := context.WithTimeout(ctx, k.prepareTime)
	defer cancel()
	note, err := k.attachUp(prep, j)
	if err != nil {
		return guest.KernelResult{}, err
	}
	if ctx.Err() != nil {
		return guest.KernelResult{}, guest.Errorf(guest.CodeService, "kernel: the caller left before the code ran: %v", context.Cause(ctx))
	}
	oomBefore := proc.OOMKills()
	x, out, again, err := k.runCode(ctx, prep, j, req.Code, codeTimeout(req), save)
	if err != nil {
		return guest.KernelResult{}, err
	}
	k.log.Debug("kernel execution", "kernel", k.id, "outcome", out, "started", x.started, "idle", x.idle, "status", x.status)
	// Cleanup runs even if the caller left.
	return k.finish(context.WithoutCancel(ctx), j, x, out, oomBefore, cmp.Or(again, note))
}

// finish settles the execution, within settleTime, and reports it; note says
// why the kernel was replaced before the code ran.
func (k *kernelState) finish(ctx context.Context, j jupyter, x *execution, out outcome, oomBefore int64, note string) (guest.KernelResult, error) {
	ctx, cancel := context.WithTimeout(ctx, k.settleTime)
	defer cancel()
	res := guest.KernelResult{Restarted: note}
	if err := k.settle(ctx, j, x, out, oomBefore, &res); err != nil {
		return guest.KernelResult{}, err
	}
	x.col.fill(&res)
	res.ExecutionCount = max(res.ExecutionCount, x.count)
	if res.Restarted == "" && x.session != "" && k.session != "" && x.session != k.session {
		// The server restarted the kernel between our check and the code:
		// find the new process, so the next call does not take it for dead.
		res.Restarted = noteDied
		if err := k.probe(ctx); err != nil {
			k.log.Warn("kernel probe", "kernel", k.id, "err", err)
		}
	}
	return res, nil
}

// lock waits for the call's turn, unless its caller leaves first.
func (k *kernelState) lock(ctx context.Context) error {
	select {
	case k.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return guest.Errorf(guest.CodeService, "kernel: waiting for the previous call to end: %v", context.Cause(ctx))
	}
}

func (k *kernelState) unlock() { <-k.turn }

// codeTimeout is how long req's code may run.
func codeTimeout(req guest.KernelRequest) time.Duration {
	if req.TimeoutMS > 0 {
		return time.Duration(req.TimeoutMS) * time.Millisecond
	}
	return guest.DefaultExecTimeout
}

// runCode runs code, for timeout from now, and waits for it. When the code
// did not run — the kernel died before taking it (killed just before this
// call), the connection broke before it was sent, or the kernel aborted it
// (as it does a request that arrives while it still discards those queued
// behind an error) — it runs it again, in a fresh kernel if need be, and
// note says why the kernel was replaced. A replacement is bounded by prep,
// and the code's time counted again from its end.
func (k *kernelState) runCode(ctx, prep context.Context, j jupyter, code string, timeout time.Duration, save saveFunc) (x *execution, out outcome, note string, err error) {
	deadline := time.Now().Add(timeout)
	for try := 1; ; try++ {
		x, out, err = k.run(ctx, code, deadline, save)
		again := ""
		switch {
		case try == 3:
		case err != nil:
			k.log.Warn("kernel send", "kernel", k.id, "err", err)
			again = noteLost
		case out == died && !x.started:
			again = noteDied
		case out == finished && x.status == "aborted":
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if again == "" {
			return x, out, note, err
		}
		note = again
		if err := k.replace(prep, j); err != nil {
			return nil, 0, "", err
		}
		deadline = time.Now().Add(timeout)
	}
}

// settle deals with how the execution ended: it interrupts code that ran
// too long, and replaces a kernel that died or would not stop, saying so in
// res.
func (k *kernelState) settle(ctx context.Context, j jupyter, x *execution, out outcome, oomBefore int64, res *guest.KernelResult) error {
	switch out {
	case finished:
		return nil
	case timedOut, canceled:
		res.TimedOut = out == timedOut
		switch k.interrupt(ctx, j, x) {
		case finished:
			return nil
		case died:
			res.Restarted = noteDiedDuring
		default:
			res.Restarted = noteHung
		}
	case died:
		res.Restarted = noteDiedDuring
		if n := proc.OOMKills(); n > oomBefore && oomBefore >= 0 {
			res.Restarted = noteOOM
		}
	case lost:
		res.Restarted = noteLost
		if !k.proc.alive() {
			res.Restarted = noteDiedDuring
		}
	}
	return k.replace(ctx, j)
}

// interrupt interrupts the running code and waits a little for the kernel
// to be idle again.
func (k *kernelState) interrupt(ctx context.Context, j jupyter, x *execution) outcome {
	if err := j.interrupt(ctx, k.id); err != nil {
		k.log.Warn("kernel interrupt", "kernel", k.id, "err", err)
		return lost
	}
	return k.wait(ctx, x, time.Now().Add(k.grace))
}

// attachUp has the notebook server started if it is not running, and
// attaches to the kernel. A server killed a moment ago may still pass the
// supervisor's check (which trusts a recent answer for a second), then
// refuse or drop connections: that is retried, once the supervisor has
// seen the exit and started a new server.
func (k *kernelState) attachUp(ctx context.Context, j jupyter) (string, error) {
	for try := 1; ; try++ {
		if err := j.up(ctx); err != nil {
			return "", err
		}
		note, err := k.attach(ctx, j)
		if err == nil || try == 3 || !serverGone(err) {
			return note, err
		}
		if supervise.Sleep(ctx, restartPause) != nil {
			return "", err
		}
	}
}

// serverGone says whether err means the notebook server went away: it
// refused a connection, or dropped one.
func serverGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// attach connects to a live kernel, starting a kernel or replacing a dead
// one as needed; note says why one was replaced.
func (k *kernelState) attach(ctx context.Context, j jupyter) (note string, err error) {
	if k.id == "" {
		return "", k.replace(ctx, j)
	}
	note, err = k.check(ctx, j)
	if err != nil {
		return "", fmt.Errorf("check kernel: %w", err)
	}
	if note == "" {
		cctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
		k.conn, err = j.connect(cctx, k.id)
		cancel()
		if err == nil {
			return "", nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		k.log.Warn("kernel connect", "kernel", k.id, "err", err)
		note = noteDied
	}
	return note, k.replace(ctx, j)
}

// check returns why the kernel must be replaced, or "" if it seems alive.
func (k *kernelState) check(ctx context.Context, j jupyter) (string, error) {
	state, err := j.state(ctx, k.id)
	switch {
	case errors.Is(err, errKernelGone):
		return noteGone, nil
	case err != nil:
		return "", err
	case state == "dead" || !k.proc.alive():
		return noteDied, nil
	}
	return "", nil
}

// replace gives the guest a fresh kernel and connects to it: the current
// kernel restarted in place (its process killed first, so a hung one need
// not be waited for), or a new kernel if there is none or the server no
// longer knows it.
func (k *kernelState) replace(ctx context.Context, j jupyter) error {
	k.disconnect()
	ctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancel()
	if k.id != "" {
		k.proc.kill()
		k.proc, k.session = kproc{}, ""
		err := k.restartInPlace(ctx, j)
		if err == nil {
			return k.connect(ctx, j)
		}
		if !errors.Is(err, errKernelGone) {
			k.log.Warn("kernel restart", "kernel", k.id, "err", err)
			if err := j.shutdown(ctx, k.id); err != nil && !errors.Is(err, errKernelGone) {
				k.log.Warn("kernel shutdown", "kernel", k.id, "err", err)
			}
		}
		k.id = ""
	}
	id, err := j.start(ctx)
	if err != nil {
		return err
	}
	k.id = id
	return k.connect(ctx, j)
}

// restartInPlace asks the server to restart the kernel. The server
// restarts a kernel it finds dead by itself, within 3 s; a restart asked
// for while its own is under way fails (notebook 6.4 with jupyter_client
// 7.4), so a failure is retried for a few seconds, unless the server does
// not know the kernel (for which a restart fails the same way, not 404).
func (k *kernelState) restartInPlace(ctx context.Context, j jupyter) error {
	var err error
	for range restartTries {
		if err = j.restart(ctx, k.id); err == nil || errors.Is(err, errKernelGone) {
			return err
		}
		if _, serr := j.state(ctx, k.id); errors.Is(serr, errKernelGone) {
			return serr
		}
		if supervise.Sleep(ctx, restartPause) != nil {
			return err
		}
	}
	return err
}

// connect connects to a kernel just (re)started and probes it.
func (k *kernelState) connect(ctx context.Context, j jupyter) error {
	c, err := j.connect(ctx, k.id)
	if err != nil {
		return err
	}
	k.conn = c
	if err := k.probe(ctx); err != nil {
		k.disconnect()
		return err
	}
	k.log.Info("kernel started", "kernel", k.id, "pid", k.proc.pid)
	return nil
}

// disconnect closes the call's connection, if it has one.
func (k *kernelState) disconnect() {
	k.conn.close()
	k.conn = nil
}

// probe asks a new kernel for its process id, silently, and notes its
// session. The kernel's process is made the out-of-memory killer's first
// choice, as exec commands are.
func (k *kernelState) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c := k.conn
	id, err := c.send(ctx, "shell", "execute_request", map[string]any{
		"code": "", "silent": true, "store_history": false, "allow_stdin": false, "stop_on_error": false,
		"user_expressions": map[string]string{"pid": "__import__('os').getpid()"},
	})
	if err != nil {
		return err
	}
	m, err := c.reply(ctx, id)
	if err != nil {
		return fmt.Errorf("kernel did not answer: %w", err)
	}
	k.session = m.Header.Session
	var r struct {
		UserExpressions struct {
			PID struct {
				Data map[string]string `json:"data"`
			} `json:"pid"`
		} `json:"user_expressions"`
	}
	_ = json.Unmarshal(m.Content, &r)
	pid, _ := strconv.Atoi(r.UserExpressions.PID.Data["text/plain"])
	if !k.watch {
		return nil
	}
	p, ok := findProc(pid)
	if !ok {
		k.log.Warn("kernel process not identified; a kill is noticed only when a request goes unanswered", "kernel", k.id, "pid", pid)
		return nil
	}
	k.proc = p
	proc.RaiseOOMScore(pid)
	return nil
}

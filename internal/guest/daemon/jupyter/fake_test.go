package jupyter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
)

// fakeJupyter is an in-process notebook server with a scripted python3
// kernel: what an execution does is chosen by its code (see run).
type fakeJupyter struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// kernels by id; calls lists the REST calls made ("POST start",
	// "POST interrupt", ...).
	kernels map[string]*fakeKernel
	calls   []string
	// aborts is how many executions to answer "aborted" before running one;
	// deaths how many "dead on arrival" executions find the kernel dead;
	// silent how many executions vanish unanswered, as one sent to a killed
	// kernel does.
	aborts, deaths, silent int
}

type fakeKernel struct {
	id      string
	session string // the kernel process's session; a restart changes it
	count   int
	// interrupt receives the REST interrupts; restarted is closed by a restart.
	interrupt chan struct{}
	restarted chan struct{}
}

func newFakeJupyter(t *testing.T) *fakeJupyter {
	f := &fakeJupyter{t: t, kernels: map[string]*fakeKernel{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /j/api/kernels", f.start)
	mux.HandleFunc("GET /j/api/kernels/{id}", f.model)
	mux.HandleFunc("DELETE /j/api/kernels/{id}", f.shutdown)
	mux.HandleFunc("POST /j/api/kernels/{id}/{action}", f.action)
	mux.HandleFunc("GET /j/api/kernels/{id}/channels", f.channels)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// state returns a kernel state and a client of f, as the handler makes them.
func (f *fakeJupyter) state() (*kernelState, jupyter) {
	k := newKernelState(slog.New(slog.DiscardHandler))
	k.watch, k.grace = false, time.Second // roomy: a loaded machine is slow to answer an interrupt
	return k, jupyter{base: f.srv.URL + "/j/", http: k.http, up: func(context.Context) error { return nil }}
}

func (f *fakeJupyter) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeJupyter) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == call {
			n++
		}
	}
	return n
}

func (f *fakeJupyter) kernel(id string) *fakeKernel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kernels[id]
}

func (f *fakeJupyter) start(w http.ResponseWriter, r *http.Request) {
	f.record("POST start")
	if r.Header.Get("X-XSRFToken") == "" {
		http.Error(w, "no xsrf", http.StatusForbidden)
		return
	}
	k := &fakeKernel{id: newMsgID(), session: newMsgID(), interrupt: make(chan struct{}, 1), restarted: make(chan struct{})}
	f.mu.Lock()
	f.kernels[k.id] = k
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, kernelModel{ID: k.id, Name: "python3", ExecutionState: "starting"})
}

func (f *fakeJupyter) model(w http.ResponseWriter, r *http.Request) {
	if f.kernel(r.PathValue("id")) == nil {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, kernelModel{ID: r.PathValue("id"), ExecutionState: "idle"})
}

func (f *fakeJupyter) shutdown(w http.ResponseWriter, r *http.Request) {
	f.record("DELETE")
	f.mu.Lock()
	delete(f.kernels, r.PathValue("id"))
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeJupyter) action(w http.ResponseWriter, r *http.Request) {
	f.record("POST " + r.PathValue("action"))
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.kernels[r.PathValue("id")]
	switch {
	case k == nil:
		http.Error(w, "no such kernel", http.StatusInternalServerError) // as notebook 6.4 answers a restart
	case r.PathValue("action") == "interrupt":
		select {
		case k.interrupt <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	case r.PathValue("action") == "restart":
		close(k.restarted)
		nk := &fakeKernel{id: k.id, session: newMsgID(), interrupt: make(chan struct{}, 1), restarted: make(chan struct{})}
		f.kernels[k.id] = nk
		writeJSON(w, http.StatusOK, kernelModel{ID: k.id, ExecutionState: "starting"})
	}
}

// channels serves a kernel's WebSocket: it runs each execute_request.
func (f *fakeJupyter) channels(w http.ResponseWriter, r *http.Request) {
	k := f.kernel(r.PathValue("id"))
	if k == nil {
		http.NotFound(w, r)
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	for {
		_, data, err := c.Read(r.Context())
		if err != nil {
			return
		}
		var m jmsg
		if err := json.Unmarshal(data, &m); err != nil || m.Header.MsgType != "execute_request" || m.Channel != "shell" {
			f.t.Errorf("fake jupyter: unexpected message %s", data)
			return
		}
		var req struct {
			Code   string `json:"code"`
			Silent bool   `json:"silent"`
		}
		_ = json.Unmarshal(m.Content, &req)
		send := func(channel, msgType string, content any) {
			body, _ := json.Marshal(content)
			out, _ := json.Marshal(jmsg{
				Header:       jheader{MsgID: newMsgID(), Session: k.session, MsgType: msgType, Version: "5.3"},
				ParentHeader: m.Header, Metadata: json.RawMessage("{}"), Content: body, Channel: channel,
			})
			_ = c.Write(r.Context(), websocket.MessageText, out)
		}
		if req.Silent {
			send("shell", "execute_reply", map[string]any{"status": "ok", "user_expressions": map[string]any{
				"pid": map[string]any{"status": "ok", "data": map[string]string{"text/plain": "0"}}}})
			continue
		}
		if !f.run(r.Context(), c, k, req.Code, send) {
			return
		}
	}
}

// run executes code in the fake kernel; it returns false to drop the
// connection.
func (f *fakeJupyter) run(ctx context.Context, c *websocket.Conn, k *fakeKernel, code string, send func(channel, msgType string, content any)) bool {
	f.mu.Lock()
	abort := f.aborts > 0
	f.aborts--
	f.mu.Unlock()
	if abort {
		send("iopub", "status", map[string]string{"execution_state": "busy"})
		send("iopub", "status", map[string]string{"execution_state": "idle"})
		send("shell", "execute_reply", map[string]any{"status": "aborted"})
		return true
	}
	serverStatus := func(state string) { // as the notebook server sends it: no parent
		out, _ := json.Marshal(jmsg{Header: jheader{MsgID: newMsgID(), MsgType: "status"}, Metadata: json.RawMessage("{}"),
			Content: json.RawMessage(`{"execution_state": "` + state + `"}`), Channel: "iopub"})
		_ = c.Write(ctx, websocket.MessageText, out)
	}
	f.mu.Lock()
	die := code == "dead on arrival" && f.deaths > 0
	f.deaths--
	f.mu.Unlock()
	if die {
		serverStatus("restarting")
		return true
	}
	f.mu.Lock()
	vanish := f.silent > 0
	f.silent--
	f.mu.Unlock()
	if vanish {
		return true
	}
	f.record("run " + code)
	k.count++
	send("iopub", "status", map[string]string{"execution_state": "busy"})
	send("iopub", "execute_input", map[string]any{"code": code, "execution_count": k.count})
	status := "ok"
	switch code {
	case "print":
		send("iopub", "stream", map[string]string{"name": "stdout", "text": "hello\n"})
		send("iopub", "stream", map[string]string{"name": "stderr", "text": "careful\n"})
		send("iopub", "execute_result", map[string]any{"data": map[string]string{"text/plain": "42"}, "execution_count": k.count})
	case "error":
		status = "error"
		send("iopub", "error", map[string]any{"ename": "ValueError", "evalue": "boom",
			"traceback": []string{"\x1b[0;31m-----\x1b[0m", "\x1b[0;32mf\x1b[0m(x)", "\x1b[0;31mValueError\x1b[0m: boom"}})
	case "plot":
		send("iopub", "display_data", map[string]any{"data": map[string]string{
			"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": base64.StdEncoding.EncodeToString(fakePNG)}})
		send("iopub", "display_data", map[string]any{"data": map[string]string{"text/plain": "<IPython.core.display.HTML object>"}})
	case "nap":
		time.Sleep(150 * time.Millisecond)
		send("iopub", "stream", map[string]string{"name": "stdout", "text": "rested\n"})
	case "sleep":
		select {
		case <-k.interrupt:
			status = "error"
			send("iopub", "error", map[string]any{"ename": "KeyboardInterrupt", "evalue": "", "traceback": []string{}})
		case <-ctx.Done():
			return false
		}
	case "hang":
		select {
		case <-k.restarted:
		case <-ctx.Done():
		}
		return false
	case "die":
		send("iopub", "stream", map[string]string{"name": "stdout", "text": "partial\n"})
		serverStatus("restarting")
		return true
	case "drop":
		return false
	}
	send("iopub", "status", map[string]string{"execution_state": "idle"})
	send("shell", "execute_reply", map[string]any{"status": status, "execution_count": k.count})
	return true
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// codeOf is the code of the guest error in err, if any.
func codeOf(err error) string {
	var e *guest.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

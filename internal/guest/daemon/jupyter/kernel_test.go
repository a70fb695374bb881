package guest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
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
	// deaths how many "dead on arrival" executions find the kernel dead.
	aborts, deaths int
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

var fakePNG = []byte("\x89PNG\r\n\x1a\nnot really a picture")

func kernelTestServer(t *testing.T) *Server {
	s, err := NewServer(ServerConfig{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func execFake(t *testing.T, k *kernelState, j jupyter, s *Server, code string, timeoutMS int64) KernelResult {
	t.Helper()
	res, err := k.execute(context.Background(), j, KernelRequest{Code: code, TimeoutMS: timeoutMS}, s.saveOutput)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

func TestKernelOutputs(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	res := execFake(t, k, j, s, "print", 0)
	if res.Stdout != "hello\n" || res.Stderr != "careful\n" || res.Result != "42" || res.ExecutionCount != 1 || res.Restarted != "" {
		t.Fatalf("print: %+v", res)
	}
	res = execFake(t, k, j, s, "error", 0)
	want := &KernelError{Name: "ValueError", Value: "boom", Traceback: []string{"-----", "f(x)", "ValueError: boom"}}
	if fmt.Sprint(res.Error) != fmt.Sprint(want) {
		t.Fatalf("error: %+v, want %+v", res.Error, want)
	}
	res = execFake(t, k, j, s, "plot", 0)
	if len(res.Images) != 1 || res.Result != "<IPython.core.display.HTML object>" {
		t.Fatalf("plot: %+v, want one image and only the HTML's text", res)
	}
	img := res.Images[0]
	saved, err := os.ReadFile(filepath.Join(s.cfg.Workspace, img.Path))
	if img.Path != ".agentbox/outputs/python-3-1.png" || img.MediaType != "image/png" || err != nil || !bytes.Equal(saved, fakePNG) || !bytes.Equal(img.Data, fakePNG) {
		t.Fatalf("image %s %s (read: %v)", img.Path, img.MediaType, err)
	}
	if n := f.count("POST start"); n != 1 {
		t.Fatalf("%d kernels started, want 1 reused", n)
	}
}

func TestKernelGoneIsReplaced(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	execFake(t, k, j, s, "print", 0)
	f.mu.Lock()
	clear(f.kernels) // the notebook server restarted
	f.mu.Unlock()
	res := execFake(t, k, j, s, "print", 0)
	if !strings.Contains(res.Restarted, "was gone") || res.Result != "42" || f.count("POST start") != 2 {
		t.Fatalf("after the server lost the kernel: %+v, %d starts", res, f.count("POST start"))
	}
}

func TestKernelDyingIsReported(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	res := execFake(t, k, j, s, "die", 0)
	if !strings.Contains(res.Restarted, "died while running this code") || res.Stdout != "partial\n" || f.count("POST restart") != 1 {
		t.Fatalf("dying code: %+v, %d restarts", res, f.count("POST restart"))
	}
	// A kernel found dead before it took the code: the code runs in a fresh one.
	f.mu.Lock()
	f.deaths = 1
	f.mu.Unlock()
	res = execFake(t, k, j, s, "dead on arrival", 0)
	if !strings.Contains(res.Restarted, "had died") || res.ExecutionCount != 1 || f.count("POST restart") != 2 {
		t.Fatalf("dead on arrival: %+v, %d restarts", res, f.count("POST restart"))
	}
}

func TestKernelConnectionLost(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	res := execFake(t, k, j, s, "drop", 0)
	if !strings.Contains(res.Restarted, "connection") || f.count("POST restart") != 1 {
		t.Fatalf("dropped connection: %+v", res)
	}
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" || res.Restarted != "" {
		t.Fatalf("next call: %+v", res)
	}
}

func TestKernelTimeoutInterrupts(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	res := execFake(t, k, j, s, "sleep", 100)
	if !res.TimedOut || res.Restarted != "" || res.Error == nil || res.Error.Name != "KeyboardInterrupt" || f.count("POST interrupt") != 1 {
		t.Fatalf("timed out: %+v", res)
	}
	res = execFake(t, k, j, s, "hang", 100)
	if !res.TimedOut || !strings.Contains(res.Restarted, "did not stop") || f.count("POST restart") != 1 {
		t.Fatalf("hung: %+v", res)
	}
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" || res.Restarted != "" {
		t.Fatalf("after the restart: %+v", res)
	}
}

func TestKernelCallerGoneInterrupts(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	execFake(t, k, j, s, "print", 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := k.execute(ctx, j, KernelRequest{Code: "sleep"}, s.saveOutput); err != nil {
		t.Fatal(err)
	}
	if f.count("POST interrupt") != 1 || f.count("POST restart") != 0 {
		t.Fatalf("calls %v, want one interrupt", f.calls)
	}
}

func TestKernelAbortedIsResent(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	f.aborts = 1
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" {
		t.Fatalf("aborted once: %+v", res)
	}
}

func TestKernelRequestChecks(t *testing.T) {
	for _, c := range []struct {
		req  KernelRequest
		code string
	}{
		{KernelRequest{}, CodeBadRequest},
		{KernelRequest{Code: "1", TimeoutMS: -1}, CodeBadRequest},
		{KernelRequest{Code: strings.Repeat("x", maxKernelCode+1)}, CodeTooLarge},
	} {
		err := checkKernelRequest(c.req)
		if e, ok := err.(*Error); !ok || e.Code != c.code {
			t.Errorf("code of %d bytes, timeout %d: err %v, want %s", len(c.req.Code), c.req.TimeoutMS, err, c.code)
		}
	}
	if err := checkKernelRequest(KernelRequest{Code: strings.Repeat("x", maxKernelCode)}); err != nil {
		t.Errorf("code of exactly the limit: %v", err)
	}
}

func TestStripANSI(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                                    "plain",
		"\x1b[0;31mred\x1b[0m":                     "red",
		"\x1b[1;32m\x1b[43mboth\x1b[39;49m":        "both",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"\x1b]0;title\x07text":                     "text",
		"\x1b(Bcharset":                            "charset",
		"\x1b[?25lcursor\x1b[2K":                   "cursor",
	} {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKernelErrorIsCapped(t *testing.T) {
	tb := make([]string, 100)
	for i := range tb {
		tb[i] = fmt.Sprint("frame ", i)
	}
	tb[99] = strings.Repeat("y", 2*maxTraceEntry)
	e := kernelError("E", strings.Repeat("v", 2*maxErrorValue), tb)
	if len(e.Value) > maxErrorValue+100 || !strings.Contains(e.Value, "omitted") {
		t.Errorf("value of %d bytes not capped", len(e.Value))
	}
	if len(e.Traceback) != maxTraceEntries+1 || e.Traceback[0] != "frame 0" || !strings.Contains(e.Traceback[maxTraceEntries/3], "40 traceback entries omitted") {
		t.Errorf("traceback of %d entries: %q ...", len(e.Traceback), e.Traceback[:3])
	}
	if last := e.Traceback[len(e.Traceback)-1]; len(last) > maxTraceEntry+100 {
		t.Errorf("last entry of %d bytes not capped", len(last))
	}
}

func TestCollectorImageCaps(t *testing.T) {
	s := kernelTestServer(t)
	c := newCollector(s.saveOutput)
	c.count = 7
	png := func(n int) json.RawMessage {
		b, _ := json.Marshal(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, n)))
		return b
	}
	c.display(map[string]json.RawMessage{"image/png": png(maxImageBytes + 1)})
	for range maxKernelImages + 1 {
		c.display(map[string]json.RawMessage{"image/png": png(2 << 20)})
	}
	var res KernelResult
	c.fill(&res)
	if len(res.Images) != maxKernelImages {
		t.Fatalf("%d images saved, want %d", len(res.Images), maxKernelImages)
	}
	returned := 0
	for _, img := range res.Images {
		returned += len(img.Data)
	}
	if returned*4/3 > maxAnswer || res.Images[0].Data == nil || res.Images[maxKernelImages-1].Data != nil {
		t.Fatalf("%d image bytes returned, want the first ones up to an answer of %d", returned, maxAnswer)
	}
	if !strings.Contains(res.Result, "over 4194304 bytes") || !strings.Contains(res.Result, "over the cap of 8 images") {
		t.Fatalf("result %q does not say which images were not saved", res.Result)
	}
	// The same names again (a restarted kernel counts from 1 again): the
	// files already there are kept.
	c = newCollector(s.saveOutput)
	c.count = 7
	c.display(map[string]json.RawMessage{"image/jpeg": png(10)})
	c.display(map[string]json.RawMessage{"image/png": png(10)})
	if p := c.images[1].Path; p != ".agentbox/outputs/python-7-2-2.png" || c.images[0].Path != ".agentbox/outputs/python-7-1.jpg" {
		t.Fatalf("paths %s, %s", c.images[0].Path, p)
	}
}

func TestParseBinaryMessage(t *testing.T) {
	msg := []byte(`{"header": {"msg_type": "comm_msg"}, "channel": "iopub"}`)
	var frame []byte
	frame = binary.BigEndian.AppendUint32(frame, 2)
	frame = binary.BigEndian.AppendUint32(frame, 12)
	frame = binary.BigEndian.AppendUint32(frame, uint32(12+len(msg)))
	frame = append(append(frame, msg...), "buffer"...)
	m, err := parseMsg(websocket.MessageBinary, frame)
	if err != nil || m.Header.MsgType != "comm_msg" || m.Channel != "iopub" {
		t.Fatalf("parse: %+v, %v", m, err)
	}
	for _, bad := range [][]byte{nil, frame[:8], append(binary.BigEndian.AppendUint32(nil, 1), 0, 0, 0, 9, 0, 0, 0, 99)} {
		if _, err := parseMsg(websocket.MessageBinary, bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

func TestKernelTimeoutStartsWhenTheKernelIsReady(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	j.up = func(context.Context) error { time.Sleep(1200 * time.Millisecond); return nil } // the server starting
	res := execFake(t, k, j, s, "nap", 1000)
	if res.TimedOut || res.Stdout != "rested\n" {
		t.Fatalf("code of 150 ms with a 1 s timeout after a 1.2 s start: %+v", res)
	}
}

func TestKernelPreparationIsBounded(t *testing.T) {
	f := newFakeJupyter(t)
	k, j := f.state()
	k.prepareTime = 100 * time.Millisecond
	j.up = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() } // a server that never answers
	start := time.Now()
	if _, err := k.execute(context.Background(), j, KernelRequest{Code: "print"}, nil); err == nil {
		t.Fatal("no error from a server that never started")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("execute returned after %v, want about the prepare bound", d)
	}
}

func TestKernelCallerGoneWhileWaitingRunsNothing(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestServer(t)
	k, j := f.state()
	execFake(t, k, j, s, "print", 0)
	long, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = k.execute(long, j, KernelRequest{Code: "sleep"}, s.saveOutput) })
	for f.count("run sleep") == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errs := make(chan error, 1)
	wg.Go(func() { _, err := k.execute(ctx, j, KernelRequest{Code: "error"}, s.saveOutput); errs <- err })
	select {
	case err := <-errs:
		if codeOf(err) != CodeService {
			t.Errorf("waiting behind a long call: err = %v, want a service error when the caller left", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a call waiting behind a long one did not return when its caller left")
	}
	stop()
	wg.Wait()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.execute(gone, j, KernelRequest{Code: "error"}, s.saveOutput); err == nil {
		t.Fatal("a caller already gone: no error")
	}
	if n := f.count("run error"); n != 0 {
		t.Fatalf("code of callers that left was run %d times", n)
	}
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" {
		t.Fatalf("the next call: %+v", res)
	}
}

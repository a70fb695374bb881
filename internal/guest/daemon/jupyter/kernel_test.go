package jupyter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
)

var fakePNG = []byte("\x89PNG\r\n\x1a\nnot really a picture")

// testWorkspace is a workspace the kernel saves images into.
type testWorkspace struct {
	outputs
	dir string
}

func kernelTestWorkspace(t *testing.T) *testWorkspace {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &testWorkspace{outputs{root}, dir}
}

func execFake(t *testing.T, k *kernelState, j jupyter, s *testWorkspace, code string, timeoutMS int64) guest.KernelResult {
	t.Helper()
	res, err := k.execute(context.Background(), j, guest.KernelRequest{Code: code, TimeoutMS: timeoutMS}, s.saveOutput)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

func TestKernelOutputs(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
	k, j := f.state()
	res := execFake(t, k, j, s, "print", 0)
	if res.Stdout != "hello\n" || res.Stderr != "careful\n" || res.Result != "42" || res.ExecutionCount != 1 || res.Restarted != "" {
		t.Fatalf("print: %+v", res)
	}
	res = execFake(t, k, j, s, "error", 0)
	want := &guest.KernelError{Name: "ValueError", Value: "boom", Traceback: []string{"-----", "f(x)", "ValueError: boom"}}
	if fmt.Sprint(res.Error) != fmt.Sprint(want) {
		t.Fatalf("error: %+v, want %+v", res.Error, want)
	}
	res = execFake(t, k, j, s, "plot", 0)
	if len(res.Images) != 1 || res.Result != "<IPython.core.display.HTML object>" {
		t.Fatalf("plot: %+v, want one image and only the HTML's text", res)
	}
	img := res.Images[0]
	saved, err := os.ReadFile(filepath.Join(s.dir, img.Path))
	if img.Path != ".agentbox/outputs/python-3-1.png" || img.MediaType != "image/png" || err != nil || !bytes.Equal(saved, fakePNG) || !bytes.Equal(img.Data, fakePNG) {
		t.Fatalf("image %s %s (read: %v)", img.Path, img.MediaType, err)
	}
	if n := f.count("POST start"); n != 1 {
		t.Fatalf("%d kernels started, want 1 reused", n)
	}
}

func TestKernelGoneIsReplaced(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
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
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
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

// A killed kernel whose process the guest could not identify answers
// nothing: the request is not waited on until its timeout, but run again
// in a fresh kernel once the kernel has not started on it for startWait.
func TestKernelUnansweredRequestIsResent(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
	k, j := f.state()
	k.startWait = 300 * time.Millisecond
	execFake(t, k, j, s, "print", 0)
	f.mu.Lock()
	f.silent = 1
	f.mu.Unlock()
	start := time.Now()
	res := execFake(t, k, j, s, "print", 0)
	if !strings.Contains(res.Restarted, "had died") || res.Result != "42" || f.count("POST restart") != 1 {
		t.Fatalf("unanswered request: %+v, %d restarts", res, f.count("POST restart"))
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the unanswered request took %v, want about startWait", took)
	}
}

func TestKernelConnectionLost(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
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
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
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
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
	k, j := f.state()
	execFake(t, k, j, s, "print", 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := k.execute(ctx, j, guest.KernelRequest{Code: "sleep"}, s.saveOutput); err != nil {
		t.Fatal(err)
	}
	if f.count("POST interrupt") != 1 || f.count("POST restart") != 0 {
		t.Fatalf("calls %v, want one interrupt", f.calls)
	}
}

func TestKernelAbortedIsResent(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
	k, j := f.state()
	f.aborts = 1
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" {
		t.Fatalf("aborted once: %+v", res)
	}
}

func TestKernelRequestChecks(t *testing.T) {
	for _, c := range []struct {
		req  guest.KernelRequest
		code string
	}{
		{guest.KernelRequest{}, guest.CodeBadRequest},
		{guest.KernelRequest{Code: "1", TimeoutMS: -1}, guest.CodeBadRequest},
		{guest.KernelRequest{Code: strings.Repeat("x", maxKernelCode+1)}, guest.CodeTooLarge},
	} {
		err := checkKernelRequest(c.req)
		if e, ok := err.(*guest.Error); !ok || e.Code != c.code {
			t.Errorf("code of %d bytes, timeout %d: err %v, want %s", len(c.req.Code), c.req.TimeoutMS, err, c.code)
		}
	}
	if err := checkKernelRequest(guest.KernelRequest{Code: strings.Repeat("x", maxKernelCode)}); err != nil {
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
	s := kernelTestWorkspace(t)
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
	var res guest.KernelResult
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
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
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
	if _, err := k.execute(context.Background(), j, guest.KernelRequest{Code: "print"}, nil); err == nil {
		t.Fatal("no error from a server that never started")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("execute returned after %v, want about the prepare bound", d)
	}
}

func TestKernelCallerGoneWhileWaitingRunsNothing(t *testing.T) {
	f, s := newFakeJupyter(t), kernelTestWorkspace(t)
	k, j := f.state()
	execFake(t, k, j, s, "print", 0)
	long, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = k.execute(long, j, guest.KernelRequest{Code: "sleep"}, s.saveOutput) })
	for f.count("run sleep") == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errs := make(chan error, 1)
	wg.Go(func() { _, err := k.execute(ctx, j, guest.KernelRequest{Code: "error"}, s.saveOutput); errs <- err })
	select {
	case err := <-errs:
		if codeOf(err) != guest.CodeService {
			t.Errorf("waiting behind a long call: err = %v, want a service error when the caller left", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a call waiting behind a long one did not return when its caller left")
	}
	stop()
	wg.Wait()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.execute(gone, j, guest.KernelRequest{Code: "error"}, s.saveOutput); err == nil {
		t.Fatal("a caller already gone: no error")
	}
	if n := f.count("run error"); n != 0 {
		t.Fatalf("code of callers that left was run %d times", n)
	}
	if res := execFake(t, k, j, s, "print", 0); res.Result != "42" {
		t.Fatalf("the next call: %+v", res)
	}
}

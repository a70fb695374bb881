package docker_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// The Jupyter kernel in a real sandbox, through the guest: state kept
// between calls, outputs, plots saved into the workspace, and recovery from
// a killed kernel, a killed notebook server, hung code and a caller that
// went away. Latencies are logged (go test -v).

// kernelSandbox creates a sandbox, destroyed when the test ends.
func kernelSandbox(t *testing.T) *guest.Client {
	t.Helper()
	d := newDriver(t)
	sb, err := d.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb.Guest()
}

// kexec runs code in the kernel, failing the test on an infrastructure error.
func kexec(t *testing.T, g *guest.Client, code string, timeoutMS int64) guest.KernelResult {
	t.Helper()
	res, err := g.KernelExecute(context.Background(), guest.KernelRequest{Code: code, TimeoutMS: timeoutMS})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

// wantResult fails unless res is a clean run whose last value is want.
func wantResult(t *testing.T, res guest.KernelResult, want string) {
	t.Helper()
	if res.Result != want || res.Error != nil || res.Restarted != "" || res.TimedOut {
		t.Fatalf("result %+v, want a clean run with value %q", res, want)
	}
}

// command runs a command in the sandbox.
func command(t *testing.T, g *guest.Client, argv ...string) guest.ExecResult {
	t.Helper()
	res, err := g.Exec(context.Background(), guest.ExecRequest{Cmd: argv})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return res
}

// wantOneKernel fails unless exactly one kernel process runs.
func wantOneKernel(t *testing.T, g *guest.Client) {
	t.Helper()
	if out := command(t, g, "pgrep", "-fc", "ipykernel_launcher").Stdout; string(out) != "1\n" {
		t.Fatalf("%q kernels running, want 1", out)
	}
}

func TestKernel(t *testing.T) {
	g := kernelSandbox(t)
	start := time.Now()
	res := kexec(t, g, "x = 41", 0)
	t.Logf("first execute (notebook server and kernel start): %v", time.Since(start))
	if res.Restarted != "" || res.Error != nil || res.ExecutionCount != 1 {
		t.Fatalf("first execute: %+v, want a clean run with count 1 and no restart note", res)
	}
	t.Run("state, stdout and value", func(t *testing.T) {
		res := kexec(t, g, "print('hello')\nx + 1", 0)
		if res.Stdout != "hello\n" || res.Result != "42" {
			t.Fatalf("stdout %q, result %q; want hello and 42", res.Stdout, res.Result)
		}
		res = kexec(t, g, "import sys, os\nprint('warn', file=sys.stderr)\nos.getcwd()", 0)
		if res.Stderr != "warn\n" || res.Result != "'/workspace'" {
			t.Fatalf("stderr %q, result %q; want warn and the workspace as cwd", res.Stderr, res.Result)
		}
	})
	t.Run("warm latency", func(t *testing.T) {
		var times []time.Duration
		for range 10 {
			start := time.Now()
			wantResult(t, kexec(t, g, "1 + 1", 0), "2")
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		t.Logf("warm execute round trip: median %v, max %v", times[len(times)/2], times[len(times)-1])
	})
	t.Run("exception", func(t *testing.T) {
		res := kexec(t, g, "def f():\n    raise ValueError('boom')\nf()", 0)
		e := res.Error
		if e == nil || e.Name != "ValueError" || e.Value != "boom" || len(e.Traceback) == 0 {
			t.Fatalf("error %+v, want ValueError boom with a traceback", e)
		}
		tb := strings.Join(e.Traceback, "\n")
		if strings.Contains(tb, "\x1b") || !strings.Contains(tb, "raise ValueError('boom')") {
			t.Fatalf("traceback has colour codes or lacks the raising line:\n%s", tb)
		}
		// The error stopped nothing: the next call runs.
		wantResult(t, kexec(t, g, "x", 0), "41")
	})
	t.Run("plot", func(t *testing.T) { checkPlot(t, g) })
	t.Run("output capped", func(t *testing.T) {
		// 1.5 MB at once: the notebook server's iopub_data_rate_limit
		// (1 MB/s by default) is raised, so nothing is dropped before the cap.
		res := kexec(t, g, "import sys\nfor i in range(1500):\n    sys.stdout.write(str(i).rjust(999) + '\\n')", 0)
		head, tail := strings.Repeat(" ", 998)+"0\n", strings.Repeat(" ", 995)+"1499\n"
		if len(res.Stdout) > guest.DefaultMaxOutput+200 || !strings.Contains(res.Stdout, "bytes of output omitted") ||
			!strings.HasSuffix(res.Stdout, tail) || !strings.HasPrefix(res.Stdout, head) {
			t.Fatalf("stdout of %d bytes is not the capped head and tail (%.100q ... %.100q); stderr %.300q", len(res.Stdout), res.Stdout, res.Stdout[max(0, len(res.Stdout)-100):], res.Stderr)
		}
	})
	t.Run("huge print", func(t *testing.T) { checkHugePrint(t, g) })
	t.Run("bad input", func(t *testing.T) {
		if _, err := g.KernelExecute(context.Background(), guest.KernelRequest{}); !errors.Is(err, guest.ErrBadRequest) {
			t.Fatalf("empty code: err = %v, want ErrBadRequest", err)
		}
		big := strings.Repeat("#", 1<<20+1)
		if _, err := g.KernelExecute(context.Background(), guest.KernelRequest{Code: big}); !errors.Is(err, guest.ErrTooLarge) {
			t.Fatalf("code over 1 MiB: err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("timeout interrupts", func(t *testing.T) { checkTimeout(t, g) })
	t.Run("caller gone interrupts", func(t *testing.T) { checkCancel(t, g) })
	t.Run("hung code restarts", func(t *testing.T) { checkHung(t, g) })
	t.Run("kernel killed", func(t *testing.T) { checkKilled(t, g) })
	t.Run("kernel kills itself", func(t *testing.T) {
		kexec(t, g, "z = 1", 0)
		res := kexec(t, g, "import os\nprint('bye', flush=True)\nos.kill(os.getpid(), 9)", 0)
		if !strings.Contains(res.Restarted, "died while running this code") {
			t.Fatalf("restarted = %q, want the kernel reported dead during the code", res.Restarted)
		}
		if res := kexec(t, g, "z", 0); res.Error == nil || res.Error.Name != "NameError" || res.Restarted != "" {
			t.Fatalf("after the restart: %+v, want a NameError and no further restart", res)
		}
	})
	t.Run("notebook server killed", func(t *testing.T) {
		kexec(t, g, "w = 1", 0)
		command(t, g, "pkill", "-9", "-f", "jupyter-notebook")
		start := time.Now()
		res := kexec(t, g, "w", 0)
		t.Logf("execute after the notebook server was killed: %v", time.Since(start))
		if !strings.Contains(res.Restarted, "was gone") || res.Error == nil || res.Error.Name != "NameError" {
			t.Fatalf("after the server was killed: %+v, want a restart note and a NameError", res)
		}
		wantOneKernel(t, g)
	})
}

// checkPlot draws a matplotlib plot and finds it saved in the workspace.
func checkPlot(t *testing.T, g *guest.Client) {
	res := kexec(t, g, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()", 0)
	if res.Error != nil || len(res.Images) != 1 {
		t.Fatalf("plot: %+v, want one image", res)
	}
	img := res.Images[0]
	if !strings.HasPrefix(img.Path, ".agentbox/outputs/python-") || !strings.HasSuffix(img.Path, ".png") || img.MediaType != "image/png" {
		t.Fatalf("image %s (%s), want a PNG under .agentbox/outputs", img.Path, img.MediaType)
	}
	saved, err := g.ReadFile(context.Background(), img.Path)
	if err != nil || !bytes.Equal(saved, img.Data) {
		t.Fatalf("saved image: %d bytes, err %v; want the %d bytes returned", len(saved), err, len(img.Data))
	}
	p, err := png.Decode(bytes.NewReader(saved))
	if err != nil || p.Bounds().Dx() < 100 {
		t.Fatalf("saved image is not a plot-sized PNG: %v", err)
	}
	if strings.Contains(res.Result, "Figure") {
		t.Fatalf("result %q repeats the figure's text form", res.Result)
	}
	// Two figures in one call, and no overwriting of the first file.
	res = kexec(t, g, "for i in range(2):\n    plt.figure()\n    plt.plot([i, 1])\nplt.show()", 0)
	if len(res.Images) != 2 || res.Images[0].Path == res.Images[1].Path || res.Images[0].Path == img.Path {
		t.Fatalf("two plots: images %v, want two new files", paths(res.Images))
	}
}

func paths(imgs []guest.KernelImage) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, i.Path)
	}
	return out
}

// checkHugePrint prints a lot at once. The notebook server drops a print
// over its data rate limit, and relays a smaller one in a message within
// the guest's read limit even when escaping triples its size: neither
// breaks the connection, which would cost the kernel its state.
func checkHugePrint(t *testing.T, g *guest.Client) {
	kexec(t, g, "before_huge = 'kept'", 0)
	for _, c := range []struct{ code, want string }{
		{"print('x' * 100_000_000)", "IOPub data rate exceeded"},
		{"print('\\U0001F600' * 7_000_000)", "IOPub data rate exceeded"}, // 28 MB, 84 MB as JSON
		{"print('\\U0001F600' * 3_700_000)", "bytes of output omitted"},  // 15 MB, 44 MB as JSON
	} {
		start := time.Now()
		res := kexec(t, g, c.code, 0)
		t.Logf("%s: %v", c.code, time.Since(start))
		if res.Restarted != "" || res.Error != nil || !strings.Contains(res.Stdout+res.Stderr, c.want) {
			t.Fatalf("%s: restarted %q, error %v, stdout %.100q, stderr %.100q; want %q and no restart",
				c.code, res.Restarted, res.Error, res.Stdout, res.Stderr, c.want)
		}
	}
	wantResult(t, kexec(t, g, "before_huge", 0), "'kept'")
}

// checkTimeout runs code past its timeout: it is interrupted and the
// kernel keeps its state.
func checkTimeout(t *testing.T, g *guest.Client) {
	kexec(t, g, "kept = 'yes'", 0)
	start := time.Now()
	res := kexec(t, g, "import time\ntime.sleep(600)", 2000)
	took := time.Since(start)
	t.Logf("sleep with a 2 s timeout returned after %v", took)
	if !res.TimedOut || res.Restarted != "" || took > 30*time.Second {
		t.Fatalf("after %v: %+v, want timed out without a restart", took, res)
	}
	if res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
		t.Fatalf("error %+v, want the interrupt's KeyboardInterrupt", res.Error)
	}
	wantResult(t, kexec(t, g, "kept", 0), "'yes'")
}

// checkCancel abandons a call: the code is interrupted, and the next call
// runs at once in the same kernel.
func checkCancel(t *testing.T, g *guest.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := g.KernelExecute(ctx, guest.KernelRequest{Code: "import time\ntime.sleep(600)"}); err == nil {
		t.Fatal("an abandoned call returned no error")
	}
	start := time.Now()
	wantResult(t, kexec(t, g, "kept", 0), "'yes'")
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the next call took %v", took)
	}
}

// checkHung runs code that ignores the interrupt: the kernel is restarted.
func checkHung(t *testing.T, g *guest.Client) {
	start := time.Now()
	res := kexec(t, g, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)", 1000)
	took := time.Since(start)
	t.Logf("code ignoring the interrupt returned after %v", took)
	if !res.TimedOut || !strings.Contains(res.Restarted, "did not stop") || took > 30*time.Second {
		t.Fatalf("after %v: %+v, want timed out and restarted", took, res)
	}
	if res := kexec(t, g, "kept", 0); res.Error == nil || res.Error.Name != "NameError" || res.Restarted != "" {
		t.Fatalf("after the restart: %+v, want a NameError and no further restart", res)
	}
}

// checkKilled kills the kernel behind the guest's back.
func checkKilled(t *testing.T, g *guest.Client) {
	kexec(t, g, "v = 1", 0)
	if res := command(t, g, "pkill", "-9", "-f", "ipykernel_launcher"); res.ExitCode != 0 {
		t.Fatalf("pkill: exit %d", res.ExitCode)
	}
	start := time.Now()
	res := kexec(t, g, "v", 0)
	t.Logf("execute after the kernel was killed: %v", time.Since(start))
	if !strings.Contains(res.Restarted, "had died") || res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("after the kill: %+v, want a restart note and a NameError", res)
	}
	wantResult(t, kexec(t, g, "v = 2\nv", 0), "2")
	// Killed and left alone long enough for the notebook server to notice
	// and restart the kernel by itself.
	command(t, g, "pkill", "-9", "-f", "ipykernel_launcher")
	time.Sleep(5 * time.Second)
	res = kexec(t, g, "v", 0)
	if res.Restarted == "" || res.Error == nil || res.Error.Name != "NameError" {
		t.Fatalf("after the kill and a wait: %+v, want a restart note and a NameError", res)
	}
	wantOneKernel(t, g)
}

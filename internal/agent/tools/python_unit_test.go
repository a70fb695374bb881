package tools

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

func TestKernelResult(t *testing.T) {
	png := []byte("\x89PNG fake")
	cases := []struct {
		name    string
		res     guest.KernelResult
		isError bool
		want    []string // in this order
		not     []string
		images  int
	}{
		{name: "value", res: guest.KernelResult{Result: "42", ExecutionCount: 3},
			want: []string{"Out[3]: 42\n"}, not: []string{"restarted", "<stdout>"}},
		{name: "stdout only", res: guest.KernelResult{Stdout: "42", ExecutionCount: 2}, want: []string{"42\n"}, not: []string{"Out", "<"}},
		{name: "streams", res: guest.KernelResult{Stdout: "hello\n", Stderr: "warn\n", Result: "'x'"},
			want: []string{"hello\n", "<stderr>\nwarn\n</stderr>", "Out: 'x'\n"}},
		{name: "nothing", res: guest.KernelResult{}, want: []string{"(no output)"}},
		{name: "error", isError: true, res: guest.KernelResult{Stdout: "before\n", Error: &guest.KernelError{
			Name: "ZeroDivisionError", Value: "division by zero",
			Traceback: []string{"Cell In[2], line 1\n----> 1 1/0", "ZeroDivisionError: division by zero"}}},
			want: []string{"before\n", "ZeroDivisionError: division by zero\nCell In[2], line 1\n----> 1 1/0\n"}},
		{name: "restarted", res: guest.KernelResult{Restarted: "the kernel died", Stdout: "1\n"},
			want: []string{"Note: the Python kernel was restarted (the kernel died): earlier variables and imports are gone", "\n1\n"}},
		{name: "restarted, said by the guest", res: guest.KernelResult{Restarted: "The Python kernel had died since the last call (killed, or out of memory) and was restarted. Variables, imports and definitions from earlier calls are gone.", Result: "1"},
			want: []string{"Note: The Python kernel had died since the last call (killed, or out of memory) and was restarted. Variables, imports and definitions from earlier calls are gone. Run the code that defines what you need again.\nOut: 1\n"}},
		{name: "timeout", isError: true, res: guest.KernelResult{TimedOut: true, Stdout: "partial\n", Restarted: "the interrupt did not stop the code"},
			want: []string{"Note: the Python kernel was restarted (the interrupt did not stop the code)", "timed out after 30s", "partial"}},
		{name: "image not sent", res: guest.KernelResult{Images: []guest.KernelImage{{Path: ".agentbox/outputs/python-1-1.png", MediaType: "image/png"}}},
			want: []string{"Saved image: /workspace/.agentbox/outputs/python-1-1.png\n"}},
		{name: "images", images: 3, res: guest.KernelResult{Images: []guest.KernelImage{
			{Path: "figures/1.png", MediaType: "image/png", Data: png},
			{Path: "figures/2.png", MediaType: "image/png", Data: bytes.Repeat([]byte("x"), 2_000_000)},
			{Path: "figures/3.svg", MediaType: "image/svg+xml", Data: []byte("<svg/>")},
			{Path: "figures/4.png", MediaType: "image/png", Data: png},
			{Path: "figures/5.jpg", MediaType: "image/jpeg", Data: png},
			{Path: "figures/6.png", MediaType: "image/png", Data: png},
		}}, want: []string{
			"Saved image: /workspace/figures/1.png\n",
			"Saved image: /workspace/figures/2.png (not shown: 2000000 bytes is too large)",
			"Saved image: /workspace/figures/3.svg (not shown: image/svg+xml",
			"Saved image: /workspace/figures/4.png\n", "Saved image: /workspace/figures/5.jpg\n",
			"Saved image: /workspace/figures/6.png (not shown: only 3 images are shown a call)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := kernelResult(c.res, 30*time.Second)
			if r.IsError != c.isError || len(r.Images) != c.images {
				t.Errorf("IsError %v, %d images; want %v, %d", r.IsError, len(r.Images), c.isError, c.images)
			}
			rest := r.Text
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("text lacks %q (in order):\n%s", w, r.Text)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.not {
				if strings.Contains(r.Text, n) {
					t.Errorf("text has %q:\n%s", n, r.Text)
				}
			}
			first, _, _ := strings.Cut(r.Text, "\n")
			if c.res.Restarted != "" && (!strings.HasPrefix(first, "Note: ") || !strings.Contains(first, "restarted")) {
				t.Errorf("the restart is not the first line:\n%s", r.Text)
			}
		})
	}
}

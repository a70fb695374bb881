package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/testenv"
)

// openXterm starts an xterm on the sandbox's desktop and waits until its
// window is on screen (mapped, not just created).
var openXterm = `xterm -T abtest -geometry 70x20+100+100 -bg white -fg black & ` + awaitWindow("abtest")

// opener is the command that opens the window the agent types into:
// xterm, or under gvisor a window without a pty (testenv.TyperWindow).
func opener(isolation string) string {
	if isolation == "gvisor" {
		return testenv.TyperWindow + " " + awaitWindow("abtest")
	}
	return openXterm
}

// awaitWindow waits for a visible window named name.
func awaitWindow(name string) string {
	return `for i in $(seq 300); do xdotool search --onlyvisible --name ` + name + ` >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1`
}

// awaitTyped waits for the command typed into the xterm to have run.
const awaitTyped = `for i in $(seq 300); do [ -s /workspace/typed.txt ] && exit 0; sleep 0.1; done; exit 1`

func computer(action string, fields map[string]any) llmtest.Turn {
	in := map[string]any{"action": action}
	for k, v := range fields {
		in[k] = v
	}
	return llmtest.Call("computer", in)
}

// TestAgentDrivesDesktop has the scripted model look at the empty desktop,
// open an xterm, type a command into it with the desktop tool and look
// again, on both wire formats. The PNGs the model received are checked:
// their size, and that the window changed the picture.
func TestAgentDrivesDesktop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ format, isolation string }{{"anthropic", "container"}, {"openai", "container"}, {"anthropic", "gvisor"}, {"anthropic", "microvm"}} {
		format := c.format
		t.Run(format+"-"+c.isolation, func(t *testing.T) {
			t.Parallel()
			needTier(t, c.isolation)
			s, fake := modelServer(t, format, llmtest.Script{Steps: []llmtest.Step{
				step(computer("screenshot", nil)),
				step(llmtest.Call("bash", map[string]any{"command": opener(c.isolation)})),
				step(computer("left_click", map[string]any{"coordinate": []int{300, 200}})),
				step(computer("type", map[string]any{"text": "echo drawn-by-the-agent > /workspace/typed.txt"})),
				step(computer("key", map[string]any{"text": "Return"})),
				step(llmtest.Call("bash", map[string]any{"command": awaitTyped})),
				step(computer("screenshot", nil)),
				step(llmtest.Call("finish", map[string]any{"summary": "typed into an xterm"})),
			}}, "AGENTBOX_ISOLATION="+c.isolation)
			j := s.runGUIJob(t, "Open a terminal window on the desktop and type a command into it", c.isolation)
			if j.Status != "complete" {
				texts, _ := s.toolResults(j.JobID)
				t.Fatalf("job %+v; results %q\n%s", j, texts, s.logs)
			}
			if f := s.zipFiles(t, j.JobID); strings.TrimSpace(f["typed.txt"]) != "drawn-by-the-agent" {
				t.Errorf("typed.txt = %q: the keystrokes did not reach the xterm", f["typed.txt"])
			}
			reqs := fake.Requests()
			first, last := resultImages(reqs[1:2]), resultImages(reqs)
			if len(first) != 1 || len(last) == 0 {
				t.Fatalf("the model received %d images after the first screenshot and %d at the end", len(first), len(last))
			}
			empty, after := decodePNG(t, first[0]), decodePNG(t, last[len(last)-1])
			for _, img := range []image.Image{empty, after} {
				if b := img.Bounds(); b.Dx() != 1024 || b.Dy() != 768 {
					t.Fatalf("screenshot is %dx%d, want 1024x768", b.Dx(), b.Dy())
				}
			}
			changed := diffShare(empty, after)
			if changed < 0.05 {
				t.Errorf("only %.1f%% of pixels differ from the empty desktop", 100*changed)
			}
			if white := whiteShare(after, image.Rect(120, 120, 500, 350)); white < 0.5 {
				t.Errorf("the xterm's area is %.0f%% white, want most of it", 100*white)
			}
			t.Logf("%s: %.0f%% of pixels changed by the window", format, 100*changed)
			checkComputerToolForm(t, format, fake.Requests()[0])
			checkKeptScreenshots(t, s, j.JobID, last)
		})
	}
}

// microvmGUIJob bounds a desktop or notebook job in a VM: under TCG the
// desktop takes about half a minute to start and the notebook server
// and kernel over a minute, past runJob's 3 minutes for a whole job.
const microvmGUIJob = 10 * time.Minute

// runGUIJob is runJob for the tier isolation: a microvm job gets
// microvmGUIJob; one that does not end in time fails the test with the
// tool results so far and the server's log.
func (s *server) runGUIJob(t *testing.T, task, isolation string) jobDTO {
	t.Helper()
	if isolation != "microvm" {
		return s.runJob(t, task, nil)
	}
	id, code := s.submit(task)
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	for deadline := time.Now().Add(microvmGUIJob); ; {
		switch j := s.job(id); j.Status {
		case "complete", "error", "canceled":
			return j
		}
		if time.Now().After(deadline) {
			texts, _ := s.toolResults(id)
			t.Fatalf("job %s not done after %v; results so far %q\n%s", id, microvmGUIJob, texts, s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkKeptScreenshots checks that the job's tool_result events name
// every image the host kept (media), and that GET serves each as a PNG:
// the latest ones those the model was sent last (older ones it is no
// longer sent), byte for byte.
func checkKeptScreenshots(t *testing.T, s *server, id string, sent [][]byte) {
	t.Helper()
	var kept []string
	images := 0
	for _, ev := range s.events(id) {
		var p struct {
			Images int      `json:"images"`
			Media  []string `json:"media"`
		}
		if ev.Type == "tool_result" && json.Unmarshal(ev.Payload, &p) == nil {
			images, kept = images+p.Images, append(kept, p.Media...)
		}
	}
	if len(kept) != images || len(kept) < len(sent) || len(sent) == 0 {
		t.Fatalf("%d images kept (%q) of %d in the results, %d sent to the model last", len(kept), kept, images, len(sent))
	}
	for i, name := range kept {
		req, _ := http.NewRequest("GET", s.url+"/v1/jobs/"+id+"/media/"+name, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" {
			t.Fatalf("GET media %s: %d %s", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		decodePNG(t, b)
		if j := i - (len(kept) - len(sent)); j >= 0 && !bytes.Equal(b, sent[j]) {
			t.Errorf("media %s is not the screenshot the model was sent", name)
		}
	}
}

// checkComputerToolForm checks Claude got Anthropic's native computer-use
// tool and other models a function tool of the same name.
func checkComputerToolForm(t *testing.T, format string, r llmtest.Recorded) {
	t.Helper()
	body := string(r.Body)
	native := strings.Contains(body, `"computer_20250124"`)
	if format == "anthropic" && !native {
		t.Errorf("anthropic request has no native computer tool: %.300s", body)
	}
	if format == "openai" && (native || !strings.Contains(body, `"name":"computer"`)) {
		t.Errorf("openai request should carry computer as a function tool")
	}
}

// TestAgentPythonKernel runs the python tool through a job: state is kept
// between calls, a killed kernel is restarted and the model is told, and a
// plot is saved into the workspace and shown to the model.
func TestAgentPythonKernel(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"container", "gvisor", "microvm"} {
		t.Run(isolation, func(t *testing.T) { t.Parallel(); agentPythonKernel(t, isolation) })
	}
}

func agentPythonKernel(t *testing.T, isolation string) {
	needTier(t, isolation)
	plot := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"
	s, fake := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("python", map[string]any{"code": "x = 41"})),
		step(llmtest.Call("python", map[string]any{"code": "print(x + 1)"})),
		step(llmtest.Call("bash", map[string]any{"command": "pkill -9 -f ipykernel_launcher; echo killed"})),
		step(llmtest.Call("python", map[string]any{"code": "print(x)"})),
		step(llmtest.Call("python", map[string]any{"code": plot})),
		step(llmtest.Call("finish", map[string]any{"summary": "done"})),
	}}, "AGENTBOX_ISOLATION="+isolation)
	j := s.runGUIJob(t, "Explore in the notebook", isolation)
	texts, failed := s.toolResults(j.JobID)
	if j.Status != "complete" || len(texts) != 6 {
		t.Fatalf("job %s, results %q\n%s", j.Status, texts, s.logs)
	}
	if failed[0] || failed[1] || strings.TrimSpace(texts[1]) != "42" {
		t.Errorf("state between calls: %q", texts[:2])
	}
	if !failed[3] || !strings.Contains(strings.ToLower(texts[3]), "restarted") || !strings.Contains(texts[3], "NameError") {
		t.Errorf("after the kernel was killed: %q", texts[3])
	}
	if failed[4] || !strings.Contains(texts[4], ".png") {
		t.Errorf("plot: %q", texts[4])
	}
	var saved string
	for name, data := range s.zipFiles(t, j.JobID) {
		if strings.HasSuffix(name, ".png") {
			saved = name
			decodePNG(t, []byte(data))
		}
	}
	if saved == "" || !strings.Contains(texts[4], saved) {
		t.Errorf("the plot is not in the workspace under the path the model was given (%q): %q", saved, texts[4])
	}
	if imgs := resultImages(fake.Requests()); len(imgs) != 1 {
		t.Errorf("the model received %d images, want the plot", len(imgs))
	}
}

// resultImages returns the images of tool results in the last request, in
// order (each request carries the whole conversation, though older images
// may be dropped; the last request has the most recent ones).
func resultImages(reqs []llmtest.Recorded) [][]byte {
	if len(reqs) == 0 {
		return nil
	}
	var out [][]byte
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult || b.Type == llm.BlockImage {
				for _, img := range b.Images {
					out = append(out, img.Data)
				}
			}
		}
	}
	return out
}

func decodePNG(t *testing.T, data []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

// diffShare is the share of pixels that differ between two same-size images.
func diffShare(a, b image.Image) float64 {
	r := a.Bounds()
	diff := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ar, ag, ab, _ := a.At(x, y).RGBA()
			br, bg, bb, _ := b.At(x, y).RGBA()
			if ar != br || ag != bg || ab != bb {
				diff++
			}
		}
	}
	return float64(diff) / float64(r.Dx()*r.Dy())
}

// whiteShare is the share of white pixels of img within r.
func whiteShare(img image.Image, r image.Rectangle) float64 {
	white := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if cr, cg, cb, _ := img.At(x, y).RGBA(); cr>>8 > 240 && cg>>8 > 240 && cb>>8 > 240 {
				white++
			}
		}
	}
	return float64(white) / float64(r.Dx()*r.Dy())
}

// microvmMissing says what this machine lacks to run the microvm tier
// (what microvm.Driver.Available checks before it fetches the kernel),
// or "" (needTier).
func microvmMissing() string {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return "no qemu-system-x86_64: " + microvm.Install
	}
	if _, err := os.Stat(microvm.DefaultVirtioFSD); err != nil {
		return "no " + microvm.DefaultVirtioFSD + ": " + microvm.Install
	}
	if os.Geteuid() != 0 {
		return "the tier runs as root (virtiofsd shares the workspace as root)"
	}
	return ""
}

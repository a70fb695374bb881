package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/doctor"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestGVisorJob: a job asking for the gvisor tier runs through the real
// server under runsc: the agent's dmesg shows gVisor's kernel log, the
// status says gvisor, and the workspace's files and zip come back.
func TestGVisorJob(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "dmesg"})),
		step(when(doctor.GVisorBanner, llmtest.Call("write_file", map[string]any{"path": "kernel.txt", "content": "gVisor\n"})),
			llmtest.Call("finish", map[string]any{"summary": "dmesg did not show gVisor"})),
		step(llmtest.Call("finish", map[string]any{"summary": "the kernel is gVisor's"})),
	}})
	id := submitOnTier(t, s, "Which kernel runs here?", "gvisor")
	j := s.awaitFinal([]string{id})[id]
	if j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	var status map[string]any
	s.do("GET", "/v1/jobs/"+j.JobID, nil, &status)
	if status["isolation"] != "gvisor" {
		b, _ := json.Marshal(status)
		t.Errorf("status %s, want \"isolation\":\"gvisor\"", b)
	}
	texts, failed := s.toolResults(j.JobID)
	if len(texts) < 2 || failed[0] || !strings.Contains(texts[0], doctor.GVisorBanner) {
		t.Errorf("dmesg's tool result %q (failed %v), want gVisor's banner", texts, failed)
	}
	if b := s.get(t, "/v1/jobs/"+j.JobID+"/files/kernel.txt", 200); string(b) != "gVisor\n" {
		t.Errorf("files/kernel.txt = %q", b)
	}
	if f := s.zipFiles(t, j.JobID); f["kernel.txt"] != "gVisor\n" {
		t.Errorf("zip files %q", keys(f))
	}
}

// submitOnTier submits task on the isolation tier and returns its job's
// ID; a tier this server lacks skips the test (fails it in CI).
func submitOnTier(t *testing.T, s *server, task, tier string) string {
	t.Helper()
	var sub struct {
		JobID string `json:"job_id"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	code := s.do("POST", "/v1/jobs", map[string]any{"task": task, "isolation": tier}, &sub)
	if code == 400 && sub.Error.Code == "isolation_unavailable" {
		testenv.Missing(t, "the "+tier+" tier", sub.Error.Message)
	}
	if code != 201 {
		t.Fatalf("submit: %d %+v\n%s", code, sub, s.logs)
	}
	return sub.JobID
}

// needTier skips a test of an isolation tier this machine lacks (fails
// in CI, which sets every tier up).
func needTier(t *testing.T, isolation string) {
	t.Helper()
	switch isolation {
	case "gvisor":
		out, err := exec.Command("docker", "info", "--format", "{{json .Runtimes}}").Output()
		if err != nil || !strings.Contains(string(out), `"runsc"`) {
			testenv.Missing(t, "the gvisor tier", "the engine has no runsc runtime (sudo ./scripts/setup.sh registers it)")
		}
	case "microvm":
		if why := microvmMissing(); why != "" {
			testenv.Missing(t, "the microvm tier", why)
		}
	}
}

// TestGVisorSandboxDeathSaysWhy: under gVisor a fork bomb reaching the
// pids limit, or a process reaching the memory limit, kills the whole
// sandbox; the job then ends in error saying so, not only that the
// guest's stream ended early.
func TestGVisorSandboxDeathSaysWhy(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	for _, tt := range []struct{ name, task, want string }{
		{"fork bomb", "f(){ f|f& }; f; sleep 60", "exited"},
		// runsc reports the kill of a sandbox at its memory limit as a plain
		// exit 137 or as the engine's OOM flag: either way the error names
		// the memory limit as the cause.
		{"memory hog", "python3 -c 'a=[]\nwhile True: a.append(bytearray(10<<20))'; sleep 60", "memory"},
	} {
		var sub struct {
			JobID string `json:"job_id"`
		}
		body := map[string]any{"task": tt.task, "isolation": "gvisor", "limits": map[string]any{"memory": "256m"}}
		switch code := s.do("POST", "/v1/jobs", body, &sub); code {
		case 400:
			testenv.Missing(t, "the gvisor tier", s.logs.String())
		case 201:
		default:
			t.Fatalf("%s: submit: %d\n%s", tt.name, code, s.logs)
		}
		j := s.awaitFinal([]string{sub.JobID})[sub.JobID]
		if j.Status != "error" || !strings.Contains(j.Error, "gVisor") || !strings.Contains(j.Error, tt.want) {
			t.Errorf("%s: job %s %q, want an error saying the gVisor sandbox died (%s)\n%s", tt.name, j.Status, j.Error, tt.want, s.logs)
		}
	}
}

// TestMicroVMJob: a job asking for the microvm tier runs through the real
// server in a QEMU VM: the agent's `uname -r` is the guest kernel's (Debian's
// cloud kernel), not the host's, the status says microvm, the workspace's
// files and zip come back, and no QEMU or virtiofsd outlives the job.
func TestMicroVMJob(t *testing.T) {
	t.Parallel()
	host, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "uname -r; echo made in a VM > vm.txt"})),
		step(when("-cloud-amd64", llmtest.Call("write_file", map[string]any{"path": "kernel.txt", "content": "guest kernel\n"})),
			llmtest.Call("finish", map[string]any{"summary": "uname did not show the guest kernel"})),
		step(llmtest.Call("finish", map[string]any{"summary": "the kernel is the VM's"})),
	}})
	id := submitOnTier(t, s, "Which kernel runs here?", "microvm")
	j := s.awaitFinal([]string{id})[id]
	if j.Status != "complete" || j.Isolation != "microvm" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	texts, failed := s.toolResults(j.JobID)
	if len(texts) < 2 || failed[0] || !strings.Contains(texts[0], "-cloud-amd64") || strings.Contains(texts[0], strings.TrimSpace(string(host))) {
		t.Errorf("uname -r's tool result %q (failed %v), want the guest's kernel, not the host's %s", texts, failed, host)
	}
	if b := s.get(t, "/v1/jobs/"+j.JobID+"/files/kernel.txt", 200); string(b) != "guest kernel\n" {
		t.Errorf("files/kernel.txt = %q", b)
	}
	if f := s.zipFiles(t, j.JobID); f["kernel.txt"] != "guest kernel\n" || f["vm.txt"] != "made in a VM\n" {
		t.Errorf("zip files %q", keys(f))
	}
	waitUntil(t, time.Minute, func() bool { return s.sandboxes() == 0 })
}

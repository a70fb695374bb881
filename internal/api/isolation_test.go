package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
	"github.com/agentbox/agentbox/internal/wire"
)

// tierDriver is a driver of which the tiers only ask the tier.
type tierDriver struct {
	sandbox.Driver
	iso string
}

func (d tierDriver) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: d.iso}
}

func TestIsolation(t *testing.T) {
	e := apitest.New(t, api.Config{})
	tiers, err := drivers.NewTiers(sandbox.IsolationContainer,
		map[string]sandbox.Driver{sandbox.IsolationContainer: tierDriver{iso: sandbox.IsolationContainer}},
		map[string]string{sandbox.IsolationMicroVM: "no qemu-system-x86_64: apt-get install qemu-system-x86", sandbox.IsolationGVisor: "runsc is not registered: run scripts/setup.sh"})
	if err != nil {
		t.Fatal(err)
	}
	e.Configure(func(c *jobs.ServiceConfig) { c.Isolation, c.CheckIsolation = sandbox.IsolationContainer, tiers.Check })
	for _, tt := range []struct{ iso, want string }{
		{"microvm", "no qemu-system-x86_64: apt-get install qemu-system-x86"},
		{"gvisor", "runsc is not registered: run scripts/setup.sh"},
		{"kvm", `isolation \"kvm\": use container, gvisor, microvm`},
	} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","isolation":"` + tt.iso + `"}`})
		if resp.StatusCode != http.StatusBadRequest || !contains(b, `"code":"isolation_unavailable"`) || !contains(b, tt.want) {
			t.Errorf("%s: %d %s, want 400 isolation_unavailable saying %q", tt.iso, resp.StatusCode, b, tt.want)
		}
	}
	for body, want := range map[string]string{
		`{"task":"x"}`: "container", `{"task":"x","isolation":"container"}`: "container",
	} {
		sr := submit(t, e, body)
		if j := getJob(t, e, sr.JobID); j.Isolation != want {
			t.Errorf("%s: isolation %q, want %q", body, j.Isolation, want)
		}
	}
}

// TestIsolationKeyOnce: a body naming a field twice, in any case, is a 400,
// never a job. encoding/json matches keys case-insensitively and keeps the
// last: {"isolation":"gvisor","Isolation":"container"} ran under container
// while a proxy reading "isolation" saw gvisor.
func TestIsolationKeyOnce(t *testing.T) {
	e := apitest.New(t, api.Config{})
	for _, body := range []string{
		`{"task":"x","isolation":"gvisor","Isolation":"container"}`,
		`{"task":"x","isolation":"gvisor","isolation":"container"}`,
		`{"task":"x","ISOLATION":"container","isolation":"gvisor"}`,
		`{"task":"x","limits":{"memory":"1g","Memory":"8g"}}`,
		`{"task":"x","task":"y"}`,
	} {
		for _, path := range []string{"/v1/jobs", "/schedule", "/submit"} {
			resp, b := do(t, e, req{method: "POST", path: path, body: body})
			if got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest); !strings.Contains(got.Message, "more than once") {
				t.Errorf("%s %s: message %q, want it to say a key is given more than once", path, body, got.Message)
			}
		}
	}
	// Metadata keys are a map's: case tells them apart.
	sr := submit(t, e, `{"task":"x","metadata":{"k":"1","K":"2"}}`)
	if md := getJob(t, e, sr.JobID).Metadata; md["k"] != "1" || md["K"] != "2" {
		t.Errorf("metadata %v, want k and K both", md)
	}
}

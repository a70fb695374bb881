package api_test

import (
	"net/http"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
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
	e.Svc.SetIsolation(sandbox.IsolationContainer, tiers.Check)
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

package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/doctor"
)

// TestDoctorMicroVMAsJobs: where a microvm job completes, doctor says
// the microvm tier works; it said "not working" while such jobs ran,
// booting a VM of its own making that no job boots.
func TestDoctorMicroVMAsJobs(t *testing.T) {
	t.Parallel()
	needTier(t, "microvm")
	s := newServer(t)
	s.start()
	id := submitOnTier(t, s, "uname -r", "microvm")
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("microvm job %+v\n%s", j, s.logs)
	}
	c := doctorCheck(t, s.env, "tier microvm")
	if c.Status != doctor.OK || !strings.HasPrefix(c.Detail, "works: a sandbox started and ran a command") {
		t.Errorf("doctor's microvm check %+v, while a microvm job completed", c)
	}
}

// doctorCheck runs `agentbox doctor --json` with env and returns its
// check called name.
func doctorCheck(t *testing.T, env []string, name string) doctor.Check {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doctor.MicroVMTimeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, guestBinary, "doctor", "--json")
	cmd.Env = env
	out, err := cmd.Output()
	if _, failed := err.(*exec.ExitError); err != nil && !failed {
		t.Fatalf("doctor: %v", err)
	}
	var checks []doctor.Check
	if err := json.Unmarshal(out, &checks); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("doctor has no check %q:\n%s", name, out)
	return doctor.Check{}
}

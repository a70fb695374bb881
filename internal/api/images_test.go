package api_test

import (
	"net/http"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
)

// TestSubmitImage: a job may name the sandbox image or one of
// AGENTBOX_IMAGES, spelled with or without ":latest"; any other is 400,
// naming the images allowed. The job's status shows the image.
func TestSubmitImage(t *testing.T) {
	e := apitest.New(t, api.Config{})
	sb := config.Default().Sandbox
	sb.Images = []string{"python-ml:latest", "node-tools:20"}
	e.Configure(func(c *jobs.ServiceConfig) { c.Images = sb.AllowedImages() })
	for body, want := range map[string]string{
		`{"task":"x","image":"python-ml"}`:                   "python-ml:latest",
		`{"task":"x","image":"python-ml:latest"}`:            "python-ml:latest",
		`{"task":"x","image":"docker.io/library/python-ml"}`: "python-ml:latest",
		`{"task":"x","image":"node-tools:20"}`:               "node-tools:20",
		`{"task":"x","image":"agentbox-sandbox"}`:            "agentbox-sandbox:latest",
		`{"task":"x","image":"` + config.DefaultImage + `"}`: config.DefaultImage,
		`{"task":"x"}`: "",
	} {
		sr := submit(t, e, body)
		if j := getJob(t, e, sr.JobID); j.Image != want {
			t.Errorf("%s: job image %q, want %q", body, j.Image, want)
		}
	}
	for _, image := range []string{"ubuntu", "python-ml:3", "node-tools", "Not A Name", "evil/agentbox-sandbox"} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","image":"` + image + `"}`})
		d := wantError(t, resp, b, http.StatusBadRequest, "image_not_allowed")
		if !(contains([]byte(d.Message), "agentbox-sandbox:latest, python-ml:latest, node-tools:20") && contains([]byte(d.Message), image)) {
			t.Errorf("%s: message %q does not name the image and those allowed", image, d.Message)
		}
	}
}

// TestSubmitImageDefaultOnly: without AGENTBOX_IMAGES only the sandbox
// image is allowed.
func TestSubmitImageDefaultOnly(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","image":"python-ml"}`})
	if d := wantError(t, resp, b, http.StatusBadRequest, "image_not_allowed"); !contains([]byte(d.Message), "allowed images: "+config.DefaultImage+" ") {
		t.Errorf("message %q", d.Message)
	}
}

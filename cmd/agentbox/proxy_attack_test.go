package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// originWide are response headers that act on the whole origin, not the
// page that sends them, with the values the attack pass of issue 25 set
// through a job's Jupyter: NEL and Report-To would have the browser report
// the API origin's later URLs to the sandbox's endpoint for a year.
var originWide = map[string]string{
	"NEL":                              `{"report_to":"x","max_age":31536000,"include_subdomains":true,"success_fraction":1.0}`,
	"Report-To":                        `{"group":"x","max_age":31536000,"endpoints":[{"url":"https://reports.invalid/"}]}`,
	"Reporting-Endpoints":              `x="https://reports.invalid/"`,
	"Refresh":                          "0; url=https://phish.invalid/",
	"Accept-CH":                        "Sec-CH-UA-Full-Version-List",
	"Critical-CH":                      "Sec-CH-UA-Full-Version-List",
	"Set-Login":                        "logged-in",
	"Origin-Agent-Cluster":             "?0",
	"Access-Control-Allow-Origin":      "https://evil.invalid",
	"Access-Control-Allow-Credentials": "true",
}

// TestSandboxPageCannotSetOriginWideHeaders: a job configures its real
// Jupyter to answer with headers that act on the whole origin, as the
// sandbox can (it writes the notebook server's configuration before the
// server starts); through the API's proxy none of them reaches the
// browser, while the page itself still does.
func TestSandboxPageCannotSetOriginWideHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	var py strings.Builder
	py.WriteString("{'headers': {")
	for k, v := range originWide {
		py.WriteString("'" + k + "': '" + v + "', ")
	}
	py.WriteString("}}")
	task := `mkdir -p ~/.jupyter && for app in NotebookApp ServerApp; do
echo "c.$app.tornado_settings = ` + strings.ReplaceAll(py.String(), `"`, `\"`) + `"; done > ~/.jupyter/jupyter_notebook_config.py &&
cp ~/.jupyter/jupyter_notebook_config.py ~/.jupyter/jupyter_server_config.py && echo configured && sleep 300`
	id, code := s.submit(task)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	defer s.do("POST", "/v1/jobs/"+id+"/cancel", nil, nil)
	waitUntil(t, 2*time.Minute, func() bool {
		return strings.Contains(string(s.get(t, "/v1/jobs/"+id+"/events", http.StatusOK)), "configured")
	})
	req, _ := http.NewRequest("GET", s.url+"/v1/jobs/"+id+"/jupyter/tree", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("the job's Jupyter page: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), s.logs)
	}
	for k := range originWide {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("the sandbox's %s reached the browser: %q", k, v)
		}
	}
}

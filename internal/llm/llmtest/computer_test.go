package llmtest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// postBeta is post to the Anthropic endpoint with an anthropic-beta header.
func postBeta(t *testing.T, s *llmtest.Server, beta, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.AnthropicURL()+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	if beta != "" {
		req.Header.Set("anthropic-beta", beta)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

func computerBody(tool string) string {
	return `{"model":"m","max_tokens":10,"tools":[` + tool + `],"messages":[{"role":"user","content":"hi"}]}`
}

const okComputer = `{"type":"computer_20250124","name":"computer","display_width_px":1280,"display_height_px":800,"display_number":1}`

// TestComputerTool: the fake takes Anthropic's computer-use tool only as
// the API does (with its beta header, named computer, with a display
// size), and records it as a native tool.
func TestComputerTool(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	if status, body := postBeta(t, s, "other-beta-2025-01-01, computer-use-2025-01-24", computerBody(okComputer)); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	rec := s.Requests()[0]
	want := llm.NativeTool{Kind: llm.NativeKindComputer, DisplayWidth: 1280, DisplayHeight: 800, DisplayNumber: 1}
	if len(rec.ToolSpecs) != 1 || rec.ToolSpecs[0].Native == nil || *rec.ToolSpecs[0].Native != want || rec.Tools[0] != "computer" {
		t.Errorf("recorded tools %+v", rec.ToolSpecs)
	}
	if len(rec.Beta) != 2 || rec.Beta[1] != "computer-use-2025-01-24" {
		t.Errorf("recorded beta %q", rec.Beta)
	}
}

func TestComputerToolRejected(t *testing.T) {
	const beta = "computer-use-2025-01-24"
	tests := []struct {
		name, beta, tool, complaint string
	}{
		{"no beta", "", okComputer, "anthropic-beta"},
		{"other beta", "files-api-2025-04-14", okComputer, "anthropic-beta"},
		{"wrong name", beta, strings.Replace(okComputer, `"name":"computer"`, `"name":"desktop"`, 1), "name: Input should be"},
		{"no width", beta, strings.Replace(okComputer, `"display_width_px":1280,`, "", 1), "display_width_px: Field required"},
		{"zero height", beta, strings.Replace(okComputer, `"display_height_px":800`, `"display_height_px":0`, 1), "display_height_px: Input should be greater"},
		{"negative display", beta, strings.Replace(okComputer, `"display_number":1`, `"display_number":-1`, 1), "display_number"},
		{"schema", beta, strings.Replace(okComputer, `}`, `,"input_schema":{"type":"object"}}`, 1), "Extra inputs"},
		{"unknown type", beta, `{"type":"computer_20991231","name":"computer"}`, "does not serve tool type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			s := llmtest.New(rec, llmtest.Steps(llmtest.Say("never")))
			status, body := postBeta(t, s, tt.beta, computerBody(tt.tool))
			if status != http.StatusBadRequest || !strings.Contains(body, "invalid_request_error") || !strings.Contains(body, tt.complaint) {
				t.Errorf("answer %d %s; want 400 invalid_request_error saying %q", status, body, tt.complaint)
			}
			if !strings.Contains(rec.complaints(), tt.complaint) {
				t.Errorf("the test was not failed with %q: %q", tt.complaint, rec.complaints())
			}
		})
	}
}

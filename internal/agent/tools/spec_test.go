package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/guest"
)

// TestSpecs checks every tool's schema is a JSON Schema object the
// providers accept: typed, described properties, required fields that
// exist, and no additional properties.
func TestSpecs(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range tools.Default() {
		s := tool.Spec()
		t.Run(s.Name, func(t *testing.T) {
			if !regexp.MustCompile(`^[a-z_]+$`).MatchString(s.Name) || seen[s.Name] {
				t.Errorf("bad or duplicate name %q", s.Name)
			}
			seen[s.Name] = true
			if len(s.Description) < 100 {
				t.Errorf("description too short for a model: %q", s.Description)
			}
			checkSchema(t, s.InputSchema)
		})
	}
}

func checkSchema(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var sch struct {
		Type                 string                     `json:"type"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatalf("schema is not JSON: %v\n%s", err, raw)
	}
	if sch.Type != "object" || len(sch.Properties) == 0 {
		t.Errorf("want an object with properties: %s", raw)
	}
	if sch.AdditionalProperties == nil || *sch.AdditionalProperties {
		t.Errorf("additionalProperties must be false: %s", raw)
	}
	for _, r := range sch.Required {
		if _, ok := sch.Properties[r]; !ok {
			t.Errorf("required %q is not a property", r)
		}
	}
	for name, p := range sch.Properties {
		var prop struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		}
		if err := json.Unmarshal(p, &prop); err != nil || prop.Description == "" ||
			!slices.Contains([]string{"string", "integer", "number", "boolean", "array"}, prop.Type) {
			t.Errorf("property %q: want a type and a description: %s", name, p)
		}
	}
}

func TestDefaultOrderAndFind(t *testing.T) {
	var names []string
	for _, s := range tools.Specs(tools.Default()) {
		names = append(names, s.Name)
	}
	want := []string{"bash", "read_file", "write_file", "edit_file", "list_files", "search_files", "run_code", "python", "computer", "finish"}
	if !slices.Equal(names, want) {
		t.Errorf("Default() = %v, want %v", names, want)
	}
	if tool, ok := tools.Find(tools.Default(), "edit_file"); !ok || tool.Spec().Name != "edit_file" {
		t.Errorf("Find(edit_file) = %v, %v", tool, ok)
	}
	if _, ok := tools.Find(tools.Default(), "nope"); ok {
		t.Error("Find(nope) found a tool")
	}
}

func TestCallUnknownTool(t *testing.T) {
	res, err := tools.Call(context.Background(), &tools.Env{}, tools.Default(), "browser", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, res, true, `no tool named "browser"`, "bash, read_file")
	wantNot(t, res, "desktop", "jupyter", "notebook")
}

func TestCallTruncates(t *testing.T) {
	long := strings.Repeat("word ", 5000)
	res, err := tools.Call(context.Background(), &tools.Env{MaxOutput: 1000}, tools.Default(), "finish", raw(t, obj{"summary": long}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish == nil || res.Finish.Summary != strings.TrimSpace(long) {
		t.Errorf("the summary itself must not be cut")
	}
	if len(res.Text) > 1000 {
		t.Errorf("text is %d bytes, over MaxOutput", len(res.Text))
	}
}

// TestBadInput: whatever the model sends, it gets a result that says what
// is wrong, never a Go error. No sandbox is needed: input is checked first.
func TestBadInput(t *testing.T) {
	cases := []struct {
		tool  tools.Tool
		input string
		want  []string
	}{
		{tools.BashTool{}, `{"command":"ls","cwd":"/"}`, []string{`unknown field "cwd"`, `"command": string (required)`}},
		{tools.BashTool{}, `{"command":["ls"]}`, []string{`field "command" must be a string, got array`}},
		{tools.BashTool{}, `{"command":"ls","timeout_seconds":"30"}`, []string{`field "timeout_seconds" must be a whole number, got string`}},
		{tools.BashTool{}, `{"command":"ls","timeout_seconds":2.5}`, []string{`must be a whole number`}},
		{tools.BashTool{}, `{"command":"ls","timeout_seconds":99999}`, []string{`between 1 and 1800`}},
		{tools.BashTool{}, `{}`, []string{`missing required field "command"`}},
		{tools.BashTool{}, `"ls"`, []string{`must be a JSON object`}},
		{tools.BashTool{}, `{"command": nul`, []string{`must be a JSON object`}},
		{tools.ReadFileTool{}, `{"path":"a","start_line":0}`, []string{`"start_line" must be between 1`}},
		{tools.ReadFileTool{}, `{"file":"a"}`, []string{`unknown field "file"`, `missing required field "path"`}},
		{tools.WriteFileTool{}, `{"path":"a"}`, []string{`missing required field "content"`}},
		{tools.WriteFileTool{}, `{"path":"a","content":42}`, []string{`"content" must be a string, got number`}},
		{tools.EditFileTool{}, `{"path":"a","old_string":"x","new_string":"y","replace_all":"yes"}`, []string{`"replace_all" must be true or false, got string`}},
		{tools.EditFileTool{}, `{"path":"a","old_string":"x"}`, []string{`missing required field "new_string"`}},
		{tools.ListFilesTool{}, `{"recursive":1}`, []string{`"recursive" must be true or false`}},
		{tools.ListFilesTool{}, `{"max_entries":0}`, []string{`"max_entries" must be between 1 and 5000`}},
		{tools.SearchFilesTool{}, `{"regex":"x"}`, []string{`unknown field "regex"`, `missing required field "pattern"`}},
		{tools.RunCodeTool{}, `{"language":"ruby","code":"puts 1"}`, []string{`"language" must be one of "python", "typescript", got "ruby"`}},
		{tools.RunCodeTool{}, `{"code":"print(1)"}`, []string{`missing required field "language"`}},
		{tools.FinishTool{}, `{"summary":""}`, []string{`summary is empty`}},
		{tools.FinishTool{}, `{"summary":"  \n"}`, []string{`summary is empty`}},
		{tools.FinishTool{}, `{"summary":"done","status":"ok"}`, []string{`unknown field "status"`}},
		{tools.FinishTool{}, `null`, []string{`missing required field "summary"`}},
	}
	for _, c := range cases {
		t.Run(c.tool.Spec().Name+" "+c.input, func(t *testing.T) {
			res := call(t, &tools.Env{}, c.tool, c.input)
			wantText(t, res, true, c.want...)
		})
	}
}

// TestFinish: finish needs no sandbox; its summary ends the job.
func TestFinish(t *testing.T) {
	res := call(t, &tools.Env{}, tools.FinishTool{}, `{"summary":" Wrote hello.py; it prints Hello, World! \n"}`)
	wantText(t, res, false, "finished")
	if res.Finish == nil || res.Finish.Summary != "Wrote hello.py; it prints Hello, World!" {
		t.Errorf("Finish = %+v", res.Finish)
	}
}

// TestGuestUnavailable: a guest that cannot be reached is infrastructure
// breaking, so a Go error, for every tool that needs the guest.
func TestGuestUnavailable(t *testing.T) {
	env := &tools.Env{Guest: guest.NewClient("/nonexistent/agentbox-test.sock")}
	inputs := map[string]string{
		"bash": `{"command":"true"}`, "read_file": `{"path":"a"}`, "write_file": `{"path":"a","content":""}`,
		"edit_file": `{"path":"a","old_string":"x","new_string":"y"}`, "list_files": `{}`,
		"search_files": `{"pattern":"x"}`, "run_code": `{"language":"python","code":"print(1)"}`,
		"python": `{"code":"1"}`, "computer": `{"action":"screenshot"}`,
	}
	for name, in := range inputs {
		tool, _ := tools.Find(tools.Default(), name)
		_, err := tool.Run(context.Background(), env, json.RawMessage(in))
		if !errors.Is(err, guest.ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := (tools.BashTool{}).Run(context.Background(), &tools.Env{}, json.RawMessage(`{"command":"true"}`)); err == nil {
		t.Error("bash without a guest: want a Go error")
	}
}

// TestAliases: the names of the desktop and notebook tools elsewhere find
// them when a model calls them, but are never shown to it.
func TestAliases(t *testing.T) {
	for alias, real := range map[string]string{"desktop": "computer", "jupyter": "python", "notebook": "python"} {
		tool, ok := tools.Find(tools.Default(), alias)
		if !ok || tool.Spec().Name != real {
			t.Errorf("Find(%s) = %v, %v; want %s", alias, tool, ok, real)
		}
		res, err := tools.Call(context.Background(), &tools.Env{}, tools.Default(), alias, json.RawMessage(`{"nope":1}`))
		if err != nil {
			t.Fatal(err)
		}
		wantText(t, res, true, "invalid input for "+real)
	}
	for _, s := range tools.Specs(tools.Default()) {
		if s.Name == "desktop" || s.Name == "jupyter" || s.Name == "notebook" {
			t.Errorf("alias %s is advertised", s.Name)
		}
	}
}

// TestDefaultFor: the desktop tool is told the display's size, and shows
// the model its scaled size.
func TestDefaultFor(t *testing.T) {
	tool, _ := tools.Find(tools.DefaultFor(tools.Options{DisplayWidth: 1920, DisplayHeight: 1080}), "computer")
	if n := tool.Spec().Native; n == nil || n.DisplayWidth != 1366 || n.DisplayHeight != 768 {
		t.Errorf("native %+v, want 1366x768", n)
	}
	if got := tools.Specs(tools.DefaultFor(tools.Options{})); !reflect.DeepEqual(got, tools.Specs(tools.Default())) {
		t.Error("DefaultFor(Options{}) is not Default()")
	}
}

package toolview

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParseCall: each tool's call reads as what it does, its strings as
// they are (no JSON escapes).
func TestParseCall(t *testing.T) {
	tests := []struct {
		tool, input string
		want        Call
	}{
		{"bash", `{"command":"cd /w \u0026\u0026 echo \"hi\" \u003c in\nls","timeout_seconds":5}`,
			Call{Tool: "bash", Kind: Command, Line: `$ cd /w && echo "hi" < in`, Code: "cd /w && echo \"hi\" < in\nls"}},
		{"write_file", `{"path":"a/b.py","content":"x = 1\n"}`, Call{Tool: "write_file", Kind: Write, Line: "write a/b.py", Path: "a/b.py", New: "x = 1\n"}},
		{"edit_file", `{"path":"a.go","old_string":"a","new_string":"b","replace_all":true}`,
			Call{Tool: "edit_file", Kind: Edit, Line: "edit a.go (all)", Path: "a.go", Old: "a", New: "b"}},
		{"read_file", `{"path":"a.go","start_line":3,"end_line":10}`, Call{Tool: "read_file", Kind: Read, Line: "read a.go lines 3-10", Path: "a.go"}},
		{"list_files", `{"path":"src","recursive":true}`, Call{Tool: "list_files", Kind: Read, Line: "list src (recursive)", Path: "src"}},
		{"search_files", `{"pattern":"TODO","glob":"*.go"}`, Call{Tool: "search_files", Kind: Read, Line: `search "TODO" in . *.go`}},
		{"run_code", `{"language":"python","code":"print(1)"}`, Call{Tool: "run_code", Kind: Code, Line: "run_code python", Code: "print(1)"}},
		{"finish", `{"summary":"done <b>","n":[1,2]}`, Call{Tool: "finish", Kind: Other, Args: []Arg{{"n", "[1,2]"}, {"summary", "done <b>"}}}},
		{"bash", `not json`, Call{Tool: "bash", Kind: Other, Args: []Arg{{"input", "not json"}}}},
	}
	for _, tt := range tests {
		if got := ParseCall(tt.tool, json.RawMessage(tt.input)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCall(%s, %s)\n got %+v\nwant %+v", tt.tool, tt.input, got, tt.want)
		}
	}
}

// TestSections: a bash result splits into its exit line, stdout and
// stderr, labels gone; a text without labels is one section; output that
// prints a label line is text.
func TestSections(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Section
	}{
		{"bash", "exit code: 1 (failure)\n<stdout>\nhello\n</stdout>\n<stderr>\noops\n</stderr>\n",
			[]Section{{"", "exit code: 1 (failure)\n"}, {"stdout", "hello\n"}, {"stderr", "oops\n"}}},
		{"plain", "wrote 3 bytes", []Section{{"", "wrote 3 bytes"}}},
		{"python", "1\n<stderr>\nwarn\n</stderr>\nOut[1]: 2\n", []Section{{"", "1\n"}, {"stderr", "warn\n"}, {"", "Out[1]: 2\n"}}},
		{"label in output", "<stdout>\na <stderr>\n<stdout>\n</stdout>\n", []Section{{"stdout", "a <stderr>\n<stdout>\n"}}},
		{"unclosed", "<stdout>\ncut", []Section{{"stdout", "cut"}}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		if got := Sections(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Sections = %q, want %q", tt.name, got, tt.want)
		}
	}
}

package netpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPolicyUnmarshal(t *testing.T) {
	var p Policy
	in := `{"mode": "allow", "allow": ["PyPI.org.", {"host": "api.example:8443", "methods": ["get"]}], "deny": ["10.0.0.0/8"], "presets": ["python"], "secrets": ["github"]}`
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatal(err)
	}
	if p.Mode != "allow" || len(p.Allow) != 2 || p.Allow[0].Host != "pypi.org" || p.Allow[1].Port != 8443 || p.Allow[1].Methods[0] != "GET" ||
		!p.Deny[0].IsIP() || p.Presets[0] != "python" || p.Secrets[0] != "github" {
		t.Errorf("decoded %+v", p)
	}
	out, _ := json.Marshal(p)
	var again Policy
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(again); string(b) != string(out) {
		t.Errorf("round trip %s, want %s", b, out)
	}

	many := make([]string, MaxEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example", i))
	}
	for _, tc := range []struct{ in, field, msg string }{
		{`{"allow": ["ok.example", "bad host"]}`, "allow[1]", "not a host name"},
		{`{"deny": [{"host": "x.example", "verbs": ["GET"]}]}`, "deny[0]", "an entry is"},
		{`{"allow": ["x.example:99999"]}`, "allow[0]", "port"},
		{`{"allow": [null]}`, "allow[0]", "an entry is"},
		{`{"mode": 3}`, "mode", "must be a string"},
		{`{"allow": "x.example"}`, "allow", "array of entries"},
		{`{"hosts": []}`, "", "unknown field"},
		{`{"allow": [` + strings.Join(many, ",") + `]}`, "allow", "at most 256"},
	} {
		var p Policy
		err := json.Unmarshal([]byte(tc.in), &p)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%.60s: %v; want a FieldError at %q saying %q", tc.in, err, tc.field, tc.msg)
		}
	}
}

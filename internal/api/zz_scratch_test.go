package api_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestZZScratch(t *testing.T) {
	e := netEnv(t)
	j := e.Submit("x")
	p := "/v1/jobs/" + j.ID + "/network"
	names := make([]string, 256)
	for i := range names {
		names[i] = fmt.Sprintf(`"%s%d.example"`, strings.Repeat("a", 60)+"."+strings.Repeat("b", 60)+"."+strings.Repeat("c", 60)+"."+strings.Repeat("d", 50), i)
	}
	cases := map[string]string{
		"dup":      `{"allow": ["a.test"], "allow": ["b.test"]}`,
		"dupcase":  `{"allow": ["a.test"], "Allow": ["b.test"]}`,
		"nest":     `{"allow": [` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]}`,
		"nestobj":  `{"allow": [{"host": "a.test", "methods": ["GET"], "x": {"y": 1}}]}`,
		"huge":     `{"allow": [` + strings.Join(names, ",") + `]}`,
		"big":      `{"allow": ["` + strings.Repeat("a", 10<<20) + `"]}`,
		"null":     `null`,
		"nullallow": `{"allow": null, "mode": null}`,
		"methods":  `{"allow": [{"host": "a.test", "methods": ["GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET","GET"]}]}`,
		"modecase": `{"mode": "OPEN"}`,
		"openvianone": `{"mode": "", "deny": ["x.test"]}`,
		"cidr":  `{"allow": ["0.0.0.0/0", "::/0"]}`,
		"port0":  `{"allow": ["a.test:0"]}`,
		"v4mapped": `{"allow": ["::ffff:10.0.0.1"]}`,
		"trailingdot": `{"allow": ["a.test."]}`,
		"unicode": `{"allow": ["пример.рф"]}`,
		"punycode": `{"allow": ["xn--e1afmkfd.xn--p1ai"]}`,
		"wild": `{"allow": ["*"]}`,
		"wild2": `{"allow": ["*.*"]}`,
		"wild3": `{"allow": ["*."]}`,
		"underscoreonly": `{"allow": ["_"]}`,
	}
	for name, body := range cases {
		resp, b := do(t, e, req{method: "PATCH", path: p, body: body})
		if len(b) > 400 {
			b = b[:400]
		}
		t.Logf("%s: %d %s", name, resp.StatusCode, b)
	}
}

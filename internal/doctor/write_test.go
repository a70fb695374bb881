package doctor

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestWrite(t *testing.T) {
	checks := []Check{{"engine", OK, "docker 27", ""}, {"kvm", Fail, "no /dev/kvm", "modprobe kvm"}}
	var b bytes.Buffer
	Write(&b, checks, false)
	want := "ok    engine        docker 27\nFAIL  kvm           no /dev/kvm\n                    fix: modprobe kvm\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	Write(&b, checks, true)
	var back []Check
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back) != 2 || back[1] != checks[1] {
		t.Errorf("JSON %s: %v", b.String(), err)
	}
}

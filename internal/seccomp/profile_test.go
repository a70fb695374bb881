package seccomp

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "regenerate seccomp.json from Docker's default profile ("+upstreamModule+", fetched through the Go module proxy)")

// upstreamModule holds the default profile ours derives from: the version
// that github.com/docker/docker v28.5.2, in go.mod, vendors.
const upstreamModule = "github.com/moby/profiles/seccomp@v0.1.0"

// removedSyscalls are taken out of every rule of Docker's default profile,
// whatever capability, architecture or kernel version the rule is
// conditioned on. docs/security.md gives operators the reasons; keep the
// two in step.
var removedSyscalls = []string{
	// Allowed by Docker's default before 25.0, so by Debian's docker.io
	// 20.10: the kernel's largest recent exploit surface, whose queued
	// operations run without passing the seccomp filter.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Allowed by Docker's default on x86: 16-bit segments for Wine and
	// DOSEMU only, and a record of kernel bugs.
	"modify_ldt",
	// Allowed by Docker's default only with CAP_BPF, CAP_PERFMON or
	// CAP_SYS_ADMIN, which sandboxes drop: removed so that adding a
	// capability later cannot open them.
	"bpf", "perf_event_open",
	// Absent from Docker's default already; listed so that a newer default
	// cannot bring them back unnoticed.
	"userfaultfd", "add_key", "keyctl", "request_key",
}

// deriveProfile returns upstream without the removed syscalls, dropping the
// rules left with no names, in upstream's layout.
func deriveProfile(upstream []byte, removed []string) ([]byte, error) {
	p, err := Parse(upstream)
	if err != nil {
		return nil, err
	}
	kept := p.Syscalls[:0]
	for _, r := range p.Syscalls {
		r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return slices.Contains(removed, n) })
		if len(r.Names) > 0 {
			kept = append(kept, r)
		}
	}
	p.Syscalls = kept
	out, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("encode seccomp profile: %w", err)
	}
	return append(out, '\n'), nil
}

// upstreamProfile reads Docker's default.json from the module cache; with
// fetch it may download the module, else it skips when the cache lacks it.
func upstreamProfile(t *testing.T, fetch bool) []byte {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", upstreamModule)
	cmd.Dir = t.TempDir() // outside the module: go.mod stays as it is
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if !fetch {
		cmd.Env = append(cmd.Env, "GOPROXY=off")
	}
	out, err := cmd.Output()
	if err != nil && !fetch {
		t.Skipf("skipping: %s is not in the module cache (go test -update fetches it): %v", upstreamModule, err)
	}
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", upstreamModule, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", upstreamModule, out, err)
	}
	b, err := os.ReadFile(filepath.Join(mod.Dir, "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSeccompProfile(t *testing.T) {
	embedded := JSON
	if *update {
		b, err := deriveProfile(upstreamProfile(t, true), removedSyscalls)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("seccomp.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote seccomp.json from %s; run the tests again to check the embedded copy", upstreamModule)
		embedded = b
	}
	p, err := Parse(embedded)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("generated from upstream", func(t *testing.T) { checkGenerated(t, embedded) })
	t.Run("removed syscalls absent", func(t *testing.T) {
		for _, r := range p.Syscalls {
			for _, n := range r.Names {
				if slices.Contains(removedSyscalls, n) {
					t.Errorf("%s is still in a rule (%s, includes %+v)", n, r.Action, r.Includes)
				}
			}
		}
	})
	t.Run("refuses with EPERM by default", func(t *testing.T) {
		if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
			t.Errorf("default %s errno %v, want SCMP_ACT_ERRNO with EPERM (1)", p.DefaultAction, p.DefaultErrnoRet)
		}
	})
	t.Run("debuggers keep ptrace", func(t *testing.T) {
		if !slices.ContainsFunc(p.Syscalls, func(r Rule) bool {
			return r.Action == "SCMP_ACT_ALLOW" && slices.Contains(r.Names, "ptrace") && (r.Includes == nil || len(r.Includes.Caps) == 0)
		}) {
			t.Error("no rule allows ptrace without a capability; gdb and strace need it")
		}
	})
}

// checkGenerated fails unless embedded is exactly what deriveProfile makes
// of upstream, and unless deriving loses nothing else of upstream.
func checkGenerated(t *testing.T, embedded []byte) {
	up := upstreamProfile(t, *update)
	want, err := deriveProfile(up, removedSyscalls)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(embedded, want) {
		t.Errorf("seccomp.json differs from %s less removedSyscalls; regenerate it with -update instead of editing it", upstreamModule)
	}
	same, err := deriveProfile(up, nil)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(up, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(same, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("decoding and encoding upstream changes it: the profile types miss a field")
	}
}

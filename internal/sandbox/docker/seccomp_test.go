package docker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// syscallProbe calls syscalls through ctypes and prints one line for each:
// its name, then "ok" or the name of the errno it failed with. io_uring's
// numbers are the same on every architecture; the others are x86_64's.
const syscallProbe = `
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
none = ctypes.c_long(-1)
calls = {
    "io_uring_setup": (425, 1, buf),
    "io_uring_enter": (426, none, 0, 0, 0, None, 0),
    "io_uring_register": (427, none, 0, None, 0),
}
if platform.machine() == "x86_64":
    calls.update({
        "modify_ldt": (154, 0, buf, 16),
        "bpf": (321, 0, buf, 16),
        "perf_event_open": (298, buf, 0, none, none, 0),
        "userfaultfd": (323, 0),
        "keyctl": (250, 0, none, 0),
        "ptrace": (101, 7, 1, 0, 0),
        "getpid": (39,),
    })
for name, (nr, *args) in calls.items():
    r = libc.syscall(nr, *args)
    print(name, "ok" if r != -1 else errno.errorcode[ctypes.get_errno()])
`

// TestSeccomp checks agentbox's seccomp profile in a real sandbox: it is
// applied, the syscalls it removes fail with its default errno (EPERM) even
// where the engine's own default allows them, and ordinary work still runs.
func TestSeccomp(t *testing.T) {
	d := newDriver(t)
	s, err := d.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	g := s.Guest()
	t.Run("applied", func(t *testing.T) {
		info, err := d.Client().ContainerInspect(context.Background(), stateOf(t, s).Ref)
		if err != nil {
			t.Fatal(err)
		}
		if !hasSeccompProfile(info.HostConfig.SecurityOpt) {
			t.Errorf("no seccomp profile without io_uring in security options %.200q", info.HostConfig.SecurityOpt)
		}
	})
	t.Run("removed syscalls refused", func(t *testing.T) { checkRefused(t, g) })
	t.Run("compilers, node and python", func(t *testing.T) { checkToolchains(t, g) })
}

// hasSeccompProfile reports whether opts carry an inline profile that
// leaves io_uring out.
func hasSeccompProfile(opts []string) bool {
	for _, o := range opts {
		profile, ok := strings.CutPrefix(o, "seccomp=")
		if ok && json.Valid([]byte(profile)) && strings.Contains(profile, `"defaultAction"`) && !strings.Contains(profile, "io_uring") {
			return true
		}
	}
	return false
}

func checkRefused(t *testing.T, g *guest.Client) {
	res := command(t, g, "python3", "-c", syscallProbe)
	if res.ExitCode != 0 {
		t.Fatalf("probe exit %d: %s", res.ExitCode, res.Stderr)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(res.Stdout)) {
		name, result, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[name] = result
	}
	for _, w := range [][2]string{
		{"io_uring_setup", "EPERM"}, {"io_uring_enter", "EPERM"}, {"io_uring_register", "EPERM"},
		{"modify_ldt", "EPERM"}, {"bpf", "EPERM"}, {"perf_event_open", "EPERM"}, {"userfaultfd", "EPERM"}, {"keyctl", "EPERM"},
		// Reaches the kernel, which answers that pid 1 is not our tracee:
		// gdb and strace keep working.
		{"ptrace", "ESRCH"},
		{"getpid", "ok"},
	} {
		if r, ok := got[w[0]]; ok && r != w[1] {
			t.Errorf("%s: %s, want %s", w[0], r, w[1])
		}
	}
	if got["io_uring_setup"] == "" {
		t.Fatalf("probe printed no io_uring_setup line: %q", res.Stdout)
	}
}

// checkToolchains builds and runs programs that start threads and
// processes. Binaries go to the workspace: the engine mounts /tmp noexec.
func checkToolchains(t *testing.T, g *guest.Client) {
	const c = "#include <pthread.h>\n#include <stdio.h>\nstatic void *run(void *p) { return p; }\n" +
		"int main(void) { pthread_t th; void *r; pthread_create(&th, 0, run, \"c\"); pthread_join(th, &r); puts(r); return 0; }\n"
	const cpp = "#include <future>\n#include <iostream>\n" +
		"int main() { std::cout << std::async(std::launch::async, [] { return 6 * 7; }).get() << std::endl; }\n"
	for _, tc := range []struct {
		name string
		req  guest.ExecRequest
		want string
	}{
		{"gcc", guest.ExecRequest{Cmd: []string{"bash", "-c", "gcc -pthread -x c -o c.out - && ./c.out"}, Stdin: []byte(c)}, "c\n"},
		{"g++", guest.ExecRequest{Cmd: []string{"bash", "-c", "g++ -pthread -x c++ -o cpp.out - && ./cpp.out"}, Stdin: []byte(cpp)}, "42\n"},
		{"node", guest.ExecRequest{Cmd: []string{"node", "-e",
			"const {Worker} = require('worker_threads'); new Worker('require(\"worker_threads\").parentPort.postMessage(6*7)', {eval: true}).on('message', console.log)"}}, "42\n"},
		{"python", guest.ExecRequest{Cmd: []string{"python3", "-c",
			"import multiprocessing as m\nwith m.Pool(2) as p: print(sum(p.map(abs, [-20, -22])))"}}, "42\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := g.Exec(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 || string(res.Stdout) != tc.want {
				t.Errorf("exit %d, stdout %q, want %q; stderr:\n%s", res.ExitCode, res.Stdout, tc.want, res.Stderr)
			}
		})
	}
}

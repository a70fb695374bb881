package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/egress/egresstest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestEgressBench measures the egress proxy against the host, all on
// loopback, with `agentbox exec` (a sandbox with a proxy of its own): a
// download from a local HTTPS server by the sandbox through the proxy vs
// by curl on the host straight to the same server, the time to first
// byte of a small plain-HTTP request either way (the set-up the proxy
// adds), 200 concurrent connections from one sandbox under the default
// bound of 64 (each served or refused, none hung), and the exec process's
// CPU per GiB through the proxy. It asserts what must hold (every
// connection answered, the downloads whole) and logs the table
// docs/benchmarks.md records. AGENTBOX_EGRESS_BENCH_MIB sets the
// download's size (default 32 MiB; the recorded figures use 256).
func TestEgressBench(t *testing.T) {
	testenv.DockerWithImage(t)
	mib := 32
	if v, err := strconv.Atoi(os.Getenv("AGENTBOX_EGRESS_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	isolation := os.Getenv("AGENTBOX_EGRESS_BENCH_ISOLATION")
	if isolation == "" {
		isolation = "container"
	}
	cpus := os.Getenv("AGENTBOX_EGRESS_BENCH_CPUS") // the sandbox's; default its default, 1
	if cpus == "" {
		cpus = "1"
	}
	u := egresstest.Start(t, "bench.test")
	size := mib << 20
	env := append(os.Environ(), "AGENTBOX_DATA_DIR="+t.TempDir(), "AGENTBOX_GUEST_BINARY="+guestBinary,
		"AGENTBOX_EGRESS_RESOLVE=bench.test=127.0.0.1", "AGENTBOX_EGRESS_ALLOW_PRIVATE=127.0.0.1/32",
		"AGENTBOX_EGRESS_CA="+u.CAFile)
	allow := []string{"--allow", fmt.Sprintf("bench.test:%d", u.Port), "--allow", fmt.Sprintf("bench.test:%d", u.HTTPPort)}
	sandboxed := func(script string) (string, time.Duration) {
		t.Helper()
		args := append([]string{"exec", "-q", "--isolation", isolation, "--timeout", "5m", "--cpus", cpus}, allow...)
		cmd := exec.Command(guestBinary, append(args, script)...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("exec %q: %v\n%s%s", script, err, out, stderrOf(err))
		}
		return string(out), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	hosted := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("curl", append([]string{"-sS", "--resolve", fmt.Sprintf("bench.test:%d:127.0.0.1", u.Port),
			"--resolve", fmt.Sprintf("bench.test:%d:127.0.0.1", u.HTTPPort), "--cacert", u.CAFile}, args...)...)
		cmd.Env = append(os.Environ(), "http_proxy=", "https_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "ALL_PROXY=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl %q: %v\n%s", args, err, stderrOf(err))
		}
		return string(out)
	}
	big := fmt.Sprintf("https://bench.test:%d/big?bytes=%d", u.Port, size)
	bigHTTP := fmt.Sprintf("http://bench.test:%d/big?bytes=%d", u.HTTPPort, size)
	small := fmt.Sprintf("http://bench.test:%d/", u.HTTPPort)
	const fmtDown = "%{size_download} %{time_total}\n"

	// The downloads (HTTPS through CONNECT, plain HTTP forwarded), three
	// times each way; the best of each.
	var inside, host, insideHTTP, hostHTTP []float64
	out, cpuDown := sandboxed(fmt.Sprintf(`for i in 1 2 3; do curl -sS -o /dev/null -w '%s' %s; done`, fmtDown, big))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		inside = append(inside, mibPerSecond(t, l, size))
	}
	out, _ = sandboxed(fmt.Sprintf(`for i in 1 2 3; do curl -sS -o /dev/null -w '%s' %s; done`, fmtDown, bigHTTP))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		insideHTTP = append(insideHTTP, mibPerSecond(t, l, size))
	}
	for range 3 {
		host = append(host, mibPerSecond(t, hosted("-o", "/dev/null", "-w", fmtDown, big), size))
		hostHTTP = append(hostHTTP, mibPerSecond(t, hosted("-o", "/dev/null", "-w", fmtDown, bigHTTP), size))
	}
	_, cpuIdle := sandboxed("true")

	// Time to first byte of a small request, 50 times each way.
	out, _ = sandboxed(fmt.Sprintf(`for i in $(seq 50); do curl -sS -o /dev/null -w '%%{time_starttransfer}\n' %s; done`, small))
	ttfbIn := seconds(t, out)
	var ttfbHost []float64
	for range 50 {
		ttfbHost = append(ttfbHost, seconds(t, hosted("-o", "/dev/null", "-w", "%{time_starttransfer}\n", small))...)
	}

	// 200 connections at once from one sandbox, each holding its
	// connection for a 1 MiB download.
	out, _ = sandboxed(fmt.Sprintf(`python3 - <<'EOF'
import concurrent.futures, urllib.request, urllib.error
def get(i):
    try:
        with urllib.request.urlopen("http://bench.test:%d/big?bytes=1048576", timeout=60) as r:
            return "served" if len(r.read()) == 1048576 else "short"
    except urllib.error.HTTPError as e:
        return "refused" if e.code == 429 else "http%%d" %% e.code
    except Exception as e:
        return "hung" if "timed out" in str(e) else type(e).__name__
with concurrent.futures.ThreadPoolExecutor(200) as ex:
    got = list(ex.map(get, range(200)))
for k in sorted(set(got)):
    print(k, got.count(k))
EOF`, u.HTTPPort))
	counts := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var k string
		var n int
		fmt.Sscan(l, &k, &n)
		counts[k] = n
	}
	if counts["served"]+counts["refused"] != 200 || counts["served"] == 0 {
		t.Errorf("200 concurrent connections: %v, want each served or refused by the bound", counts)
	}

	best := func(v []float64) float64 { return slices.Max(v) }
	gib := float64(3*size) / (1 << 30) // the HTTPS downloads' exec
	t.Logf(`Isolation %s, sandbox --cpus %s, a %d MiB download three times each way (best), 50 small requests each way (p50):

| measure | through the proxy (sandbox) | host curl, direct | ratio |
| --- | --- | --- | --- |
| download throughput, HTTPS (CONNECT) | %.0f MiB/s | %.0f MiB/s | %.2f× |
| download throughput, plain HTTP (forwarded) | %.0f MiB/s | %.0f MiB/s | %.2f× |
| time to first byte, small HTTP request (p50) | %.2f ms | %.2f ms | +%.2f ms set-up added |
| 200 concurrent connections from one sandbox (bound 64) | %d served, %d refused, %d otherwise | – | – |
| CPU of the agentbox exec process per GiB through the proxy | %.2f s | – | – |`,
		isolation, cpus, mib, best(inside), best(host), best(inside)/best(host),
		best(insideHTTP), best(hostHTTP), best(insideHTTP)/best(hostHTTP),
		1000*median(ttfbIn), 1000*median(ttfbHost), 1000*(median(ttfbIn)-median(ttfbHost)),
		counts["served"], counts["refused"], 200-counts["served"]-counts["refused"],
		(cpuDown-cpuIdle).Seconds()/gib)
}

// mibPerSecond reads curl's "size seconds" line and checks the size.
func mibPerSecond(t *testing.T, line string, want int) float64 {
	t.Helper()
	var n, secs float64
	if _, err := fmt.Sscan(line, &n, &secs); err != nil || int(n) != want || secs <= 0 {
		t.Fatalf("download %q: want %d bytes", line, want)
	}
	return n / (1 << 20) / secs
}

func seconds(t *testing.T, out string) []float64 {
	t.Helper()
	var v []float64
	for _, f := range strings.Fields(out) {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatalf("timing %q: %v", f, err)
		}
		v = append(v, x)
	}
	return v
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

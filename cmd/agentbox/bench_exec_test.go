package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestExecBench measures `agentbox exec -i cat` against `docker exec -i
// CONTAINER cat` (throughput of AGENTBOX_EXEC_BENCH_MIB, default 100), and
// `agentbox exec true` against `docker run --rm IMAGE true` (wall time),
// on AGENTBOX_EXEC_BENCH_ISOLATION (default container). It runs only when
// AGENTBOX_EXEC_BENCH is set: it is a measurement, not a check.
func TestExecBench(t *testing.T) {
	if os.Getenv("AGENTBOX_EXEC_BENCH") == "" {
		t.Skip("a benchmark: set AGENTBOX_EXEC_BENCH=1 to run it")
	}
	sandboxEnv(t)
	iso := cmp.Or(os.Getenv("AGENTBOX_EXEC_BENCH_ISOLATION"), "container")
	needTier(t, iso)
	mib, _ := strconv.Atoi(cmp.Or(os.Getenv("AGENTBOX_EXEC_BENCH_MIB"), "100"))
	data := make([]byte, mib<<20)
	rand.Read(data)
	img := testenv.Image()
	dockerRun := []string{"docker", "run", "--rm"}
	if iso == "gvisor" {
		dockerRun = append(dockerRun, "--runtime=runsc")
	}
	// The same CPU limit as the sandbox's default, for cat to run under.
	ctr, err := exec.Command(dockerRun[0], append(slices.Clone(dockerRun[1:]), "-d", "--cpus", "1", img, "sleep", "600")...).Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(ctr))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	var ratios []float64
	for range 5 {
		a := timedCat(t, data, guestBinary, "exec", "-q", "-i", "--isolation", iso, "cat")
		d := timedCat(t, data, "docker", "exec", "-i", id, "cat")
		t.Logf("%d MiB through cat: agentbox exec -i %.0f MiB/s (%v in all), docker exec -i %.0f MiB/s (%v in all): ratio %.2f",
			mib, a.rate, a.wall.Round(time.Millisecond), d.rate, d.wall.Round(time.Millisecond), a.rate/d.rate)
		ratios = append(ratios, a.rate/d.rate)
	}
	slices.Sort(ratios)
	t.Logf("throughput ratio, median of 5: %.2f (%.2f–%.2f)", ratios[2], ratios[0], ratios[4])
	var ours, theirs []time.Duration
	for range 5 {
		ours = append(ours, timed(t, guestBinary, "exec", "-q", "--isolation", iso, "true"))
		theirs = append(theirs, timed(t, append(slices.Clone(dockerRun), img, "true")...))
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	t.Logf("exec true: agentbox exec %v (p50 of 5, %v–%v), docker run --rm %v (%v–%v)", ours[2], ours[0], ours[4], theirs[2], theirs[0], theirs[4])
}

type catTiming struct {
	wall time.Duration
	rate float64 // MiB/s from the first byte back to the last
}

// timedCat pipes data through the command and checks it comes back whole.
func timedCat(t *testing.T, data []byte, args ...string) catTiming {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first time.Time
	buf := make([]byte, 256<<10)
	var n int
	for {
		k, err := out.Read(buf)
		if k > 0 && first.IsZero() {
			first = time.Now()
		}
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil || n != len(data) {
		t.Fatalf("%s: %v, %d bytes of %d", args, err, n, len(data))
	}
	end := time.Now()
	return catTiming{wall: end.Sub(start), rate: float64(n) / (1 << 20) / end.Sub(first).Seconds()}
}

func timed(t *testing.T, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", args, err, out)
	}
	return time.Since(start)
}

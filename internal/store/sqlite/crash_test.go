package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// crashEnv names the database a re-executed test binary writes to until it
// is killed.
const crashEnv = "AGENTBOX_STORE_CRASH_DB"

// TestCrashDurability kill -9s a process that is creating jobs and checks
// that every job it reported as created survived, exactly once.
func TestCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	printed := readCreated(t, cmd, out, 1000)
	cmd.Wait()
	if len(printed) < 1000 {
		t.Fatalf("child reported %d jobs before it died, want at least 1000", len(printed))
	}
	checkSurvived(t, path, printed)
}

// readCreated reads the child's "created ID" lines and kills it after n of
// them; it keeps reading what the child wrote before it died.
func readCreated(t *testing.T, cmd *exec.Cmd, out interface{ Read([]byte) (int, error) }, n int) []string {
	t.Helper()
	var ids []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "created ")
		if !ok {
			continue
		}
		ids = append(ids, id)
		if len(ids) == n {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatalf("kill: %v", err)
			}
		}
	}
	return ids
}

// checkSurvived reopens the database and finds each printed ID once.
func checkSurvived(t *testing.T, path string, printed []string) {
	t.Helper()
	s := openClosed(t, path, sqlite.Options{})
	seen := map[string]int{}
	opts := store.ListOptions{Limit: 1000}
	for {
		page, err := s.ListJobs(t.Context(), opts)
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		for _, j := range page.Jobs {
			seen[j.ID]++
		}
		if opts.Cursor = page.NextCursor; opts.Cursor == "" {
			break
		}
	}
	for _, id := range printed {
		if seen[id] != 1 {
			t.Errorf("job %s reported created is stored %d times", id, seen[id])
		}
	}
	t.Logf("child reported %d jobs; %d stored after kill -9", len(printed), len(seen))
}

// crashChild creates jobs from 8 goroutines forever, printing each ID once
// CreateJob has returned.
func crashChild(path string) {
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%06d", w, i)
				j := store.Job{ID: id, Task: "t", Status: store.StatusPending, IdempotencyKey: id,
					RequestHash: "h", CreatedAt: time.Now()}
				if _, _, err := s.CreateJob(context.Background(), j); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(os.Stdout, "created", id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

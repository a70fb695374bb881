package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest/daemon"
)

// The guest runs in a copy of the test binary: the creator starts it with
// modeEnv=launch; that process starts the guest (modeEnv=serve) in a
// session of its own, prints its PID and exits, so the guest is nobody's
// child here, as a container's process is not, and outlives its creator.
// Every process of a sandbox carries markerEnv=<its directory>, by which
// Destroy finds them all (a command's children leave its process group).
const (
	modeEnv   = "AGENTBOX_FAKE_GUEST"
	configEnv = "AGENTBOX_FAKE_GUEST_CONFIG"
	markerEnv = "AGENTBOX_FAKE_SANDBOX"
	logFile   = "guest.log"
	sigCont   = syscall.SIGCONT
)

func init() {
	mode := os.Getenv(modeEnv)
	if mode == "" || !testing.Testing() {
		return
	}
	os.Unsetenv(modeEnv)
	switch mode {
	case "launch":
		os.Exit(runLauncher())
	case "serve":
		os.Exit(runGuest())
	}
}

// guestConfig is what the guest process is told, as JSON in configEnv.
type guestConfig struct {
	Workspace, Socket, WebBase string
	Env                        map[string]string
	Width, Height              int
	Bound                      bool
}

// launch starts the guest of the sandbox in dir and returns its PID.
func launch(dir string, cfg guestConfig) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Dir = cfg.Workspace
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + filepath.Join(dir, "tmp"),
		"LANG=C.UTF-8", markerEnv + "=" + dir, modeEnv + "=launch", configEnv + "=" + string(b)}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w: %s", err, errOut.Bytes())
	}
	return strconv.Atoi(strings.TrimSpace(out.String()))
}

// runLauncher is the launch process: it starts the guest and says its PID.
func runLauncher() int {
	log, err := os.OpenFile(filepath.Join(os.Getenv(markerEnv), logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), modeEnv+"=serve")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

// runGuest is the guest process: the real daemon on the sandbox's socket
// until SIGTERM.
func runGuest() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var cfg guestConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		log.Error("fake guest: config", "err", err)
		return 1
	}
	os.Unsetenv(configEnv)
	srv, err := daemon.New(daemon.Config{Workspace: cfg.Workspace, Version: "fake", Env: cfg.Env, WebBase: cfg.WebBase, Bound: cfg.Bound,
		DisplayWidth: cfg.Width, DisplayHeight: cfg.Height, Log: log})
	if err != nil {
		log.Error("fake guest", "err", err)
		return 1
	}
	l, err := daemon.ListenUnix(cfg.Socket)
	if err != nil {
		log.Error("fake guest", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go stopWhenGone(ctx, filepath.Dir(cfg.Socket), stop)
	if err := srv.Serve(ctx, l); err != nil {
		log.Error("fake guest", "err", err)
		return 1
	}
	return 0
}

// stopWhenGone calls stop once dir is removed: a sandbox its test forgot
// to destroy ends with the test's temporary directory, not with the host.
// It returns when ctx ends.
func stopWhenGone(ctx context.Context, dir string, stop func()) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				stop()
				return
			}
		}
	}
}

// procStart is the start time of process pid (field 22 of its stat), or ""
// if it is not running (gone, or a zombie).
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}

// processes are the PIDs of the processes carrying dir's marker.
func processes(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	want := []byte(markerEnv + "=" + dir + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalAll sends sig to every process of the sandbox in dir.
func signalAll(dir string, sig syscall.Signal) error {
	for _, pid := range processes(dir) {
		syscall.Kill(pid, sig)
	}
	return nil
}

// freeze stops every process of the sandbox in dir, again until no new
// one appears (a process forked before its parent stopped).
func freeze(dir string) error {
	seen := map[int]bool{}
	for range 100 {
		fresh := false
		for _, pid := range processes(dir) {
			if !seen[pid] {
				seen[pid], fresh = true, true
				syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if !fresh {
			return awaitStopped(dir, seen)
		}
	}
	return fmt.Errorf("fake sandbox %s: processes keep appearing", filepath.Base(dir))
}

// awaitStopped waits until every thread of the processes in pids is
// stopped (state T in /proc), or gone: SIGSTOP takes effect after kill
// returns, and a pause that returned while a thread of the guest still
// ran could answer one more request.
func awaitStopped(dir string, pids map[int]bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for pid := range pids {
		for !stopped(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("fake sandbox %s: process %d did not stop", filepath.Base(dir), pid)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// stopped says whether every thread of pid is stopped (or pid is gone).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true // gone
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command's closing parenthesis.
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't' && b[i+2] != 'Z' && b[i+2] != 'X') {
			return false
		}
	}
	return true
}

// killAll kills every process of the sandbox in dir and waits until none
// is left: frozen first, so that none forks past the killing.
func killAll(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		freeze(dir)
		pids := processes(dir)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fake sandbox %s: processes %v survive SIGKILL", filepath.Base(dir), pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

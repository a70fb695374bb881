package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Tmux is a real terminal for a test: a tmux server of the test's own
// (socket "abtest-<pid>-<n>") running one program in a window of a fixed
// size. Screen is what a person would see; Raw is every byte the program
// wrote, escape sequences included. The server is killed when the test
// ends, and ReapStale kills those of killed test runs.
type Tmux struct {
	t      testing.TB
	bin    string
	socket string
	raw    string
}

var tmuxCount atomic.Int64

// tmuxSocketPrefix names the tmux servers of tests.
const tmuxSocketPrefix = "abtest-"

// StartTmux runs args in a new terminal of cols×rows with env added to
// the test's environment. It skips or fails (CI) without tmux.
func StartTmux(t testing.TB, cols, rows int, env []string, args ...string) *Tmux {
	t.Helper()
	m := &Tmux{t: t, bin: Tool(t, "tmux", "apt-get install tmux"),
		socket: fmt.Sprintf("%s%d-%d", tmuxSocketPrefix, os.Getpid(), tmuxCount.Add(1))}
	dir := t.TempDir()
	conf := filepath.Join(dir, "tmux.conf")
	m.raw = filepath.Join(dir, "raw")
	// remain-on-exit keeps the pane (and its exit status) after the
	// program ends; the status bar is off so the screen is the program's;
	// set-clipboard on lets a program's OSC 52 make a buffer (Buffers),
	// as it would set a terminal's clipboard.
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g status off\nset -g default-terminal xterm-256color\nset -g set-clipboard on\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"-f", conf, "new-session", "-d", "-s", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows)}
	for _, e := range env {
		cmd = append(cmd, "-e", e)
	}
	m.run(append(append(cmd, "--"), args...)...)
	t.Cleanup(func() { _ = exec.Command(m.bin, "-L", m.socket, "kill-server").Run() })
	m.run("pipe-pane", "-t", "t", "-o", "cat >> "+m.raw)
	return m
}

// run runs a tmux command on the test's server.
func (m *Tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command(m.bin, append([]string{"-L", m.socket}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Screen is the terminal's visible text, one line per row.
func (m *Tmux) Screen() string { return m.run("capture-pane", "-p", "-t", "t") }

// Raw is every byte the program wrote since it started.
func (m *Tmux) Raw() string {
	b, _ := os.ReadFile(m.raw)
	return string(b)
}

// Title is the pane's title, which a program sets with OSC 0 or 2.
func (m *Tmux) Title() string {
	return strings.TrimSpace(m.run("display-message", "-p", "-t", "t", "#{pane_title}"))
}

// Buffers is what programs copied to the clipboard (OSC 52), one buffer
// a line.
func (m *Tmux) Buffers() string { return m.run("list-buffers", "-F", "#{buffer_sample}") }

// Type types text as keys, literally.
func (m *Tmux) Type(text string) { m.run("send-keys", "-t", "t", "-l", text) }

// Keys presses keys by tmux's names: Enter, Up, C-c, M-Enter...
func (m *Tmux) Keys(keys ...string) { m.run(append([]string{"send-keys", "-t", "t"}, keys...)...) }

// Paste pastes text as a terminal does: inside bracketed-paste markers
// when the program asked for them.
func (m *Tmux) Paste(text string) {
	m.run("set-buffer", "-b", "p", "--", text)
	m.run("paste-buffer", "-p", "-d", "-b", "p", "-t", "t")
}

// WaitFor polls the screen until ok holds and returns it; the test fails
// with the screen after timeout.
func (m *Tmux) WaitFor(what string, timeout time.Duration, ok func(screen string) bool) string {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := m.Screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("waited %v for %s; the screen:\n%s", timeout, what, s)
		}
		time.Sleep(20 * time.Millisecond) // polling the screen: there is no event to await
	}
}

// Exited reports whether the program ended, and its exit status.
func (m *Tmux) Exited() (code int, exited bool) {
	out := strings.Fields(m.run("display-message", "-p", "-t", "t", "#{pane_dead} #{pane_dead_status}"))
	if len(out) < 1 || out[0] != "1" {
		return 0, false
	}
	if len(out) > 1 {
		code, _ = strconv.Atoi(out[1])
	}
	return code, true
}

// reapTmux kills the tmux servers of test processes that are gone.
func reapTmux() {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("tmux-%d", os.Getuid()))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tmuxSocketPrefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err == nil && pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // its test still runs
		}
		_ = exec.Command("tmux", "-L", e.Name(), "kill-server").Run()
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
}

// Hangup closes the terminal as a person closing its window does: the
// program gets SIGHUP. It returns the program's pid, to await its end.
func (m *Tmux) Hangup() (pid int) {
	m.t.Helper()
	pid, _ = strconv.Atoi(strings.TrimSpace(m.run("display-message", "-p", "-t", "t", "#{pane_pid}")))
	m.run("kill-session", "-t", "t")
	return pid
}

// Resize makes the terminal cols×rows, as a person resizing its window
// does: the program gets SIGWINCH.
func (m *Tmux) Resize(cols, rows int) {
	m.t.Helper()
	m.run("resize-window", "-t", "t", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows))
}

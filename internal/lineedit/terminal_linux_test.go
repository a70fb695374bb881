package lineedit

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal pair through /dev/ptmx.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("skipping: no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd, err := fileFd(master)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

func termios(t *testing.T, f *os.File) *unix.Termios {
	t.Helper()
	fd, err := fileFd(f)
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio
}

func TestOpenTerminal(t *testing.T) {
	master, slave := openPty(t)
	fd, _ := fileFd(slave)
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 33}); err != nil {
		t.Fatal(err)
	}
	before := termios(t, slave)
	if before.Lflag&unix.ECHO == 0 || before.Lflag&unix.ICANON == 0 {
		t.Fatal("a new pty is not in cooked mode")
	}
	out := make(chan string, 1)
	go func() { // the terminal's screen side: keep the pty drained
		b, _ := io.ReadAll(master)
		out <- string(b)
	}()

	e, err := OpenTerminal(slave, slave, Config{Prompt: "> "})
	if err != nil {
		t.Fatal(err)
	}
	raw := termios(t, slave)
	if raw.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG|unix.IEXTEN) != 0 || raw.Iflag&(unix.IXON|unix.ICRNL) != 0 {
		t.Errorf("not raw: lflag %#x iflag %#x", raw.Lflag, raw.Iflag)
	}
	if raw.Oflag&unix.OPOST == 0 || raw.Oflag&unix.ONLCR == 0 {
		t.Errorf("output processing off: oflag %#x", raw.Oflag)
	}
	if w := e.width(); w != 33 {
		t.Errorf("width %d, want 33", w)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := master.WriteString("hi\x1b[200~a\rb\x1b[201~\r"); err != nil {
		t.Fatal(err)
	}
	line, err := e.ReadLine(ctx)
	if err != nil || line != "hia\nb" {
		t.Errorf("ReadLine %q, %v; want \"hia\\nb\"", line, err)
	}

	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the reader")
	}
	after := termios(t, slave)
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Errorf("not restored: lflag %#x iflag %#x oflag %#x", after.Lflag, after.Iflag, after.Oflag)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	slave.Close()
	screen := <-out
	if !strings.Contains(screen, pasteOn) || !strings.Contains(screen, pasteOff) {
		t.Errorf("bracketed paste not turned on and off: %q", screen)
	}
}

package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinksOutOfADeepChainStaysCheap: a sandbox in DIR (in place) can make
// a chain of directories thousands deep in seconds; the walk naming its
// links out, which runs on the host as root when run or chat ends, reached
// each directory through a path from DIR again (os.Root), the square of
// the depth: 37 s of a core for 8,000 levels, Ctrl-C not ending it. It
// stops within a bounded amount of work and says it did not look at all.
func TestLinksOutOfADeepChainStaysCheap(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "0out")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 3000 // 4.5 million steps resolving each level from dir
	for range depth {
		if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "a", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	if err := unix.Symlinkat("/etc/shadow", fd, "deep"); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	links, complete := linksOut(dir)
	if complete {
		t.Errorf("the walk went %d levels down, resolving each from the top; want it stopped within its budget", depth)
	}
	if len(links) != 1 || links[0] != "0out -> /etc/passwd" {
		t.Errorf("links = %q, want the shallow one found before the walk stopped", links)
	}
	if d := DescribeLinksOut(dir); !strings.Contains(d, "0out -> /etc/passwd") || !strings.Contains(d, "not all") {
		t.Errorf("DescribeLinksOut = %q, want the link found and that not all was looked at", d)
	}
}

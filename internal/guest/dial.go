package guest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// socketDialer connects to the guest's socket, rel beneath dir, without
// following a link. dir is the host's own (a sandbox's private state
// directory); every component of rel is in a directory the sandbox writes
// to, so the sandbox could have put a link, a file or a FIFO there in place
// of its socket. Dialing by path would then connect the host (root, as a
// rule) to any socket the link names: the engine's, another service's.
//
// Each component is opened with O_PATH|O_NOFOLLOW beneath the previous one's
// descriptor and its type checked on the descriptor; the connection is made
// through /proc/self/fd/N, which reaches exactly the inode that descriptor
// holds however the path changes meanwhile (and is never over sun_path's
// 108 bytes).
type socketDialer struct {
	dir  string
	rel  string
	path []string
}

func newSocketDialer(dir, rel string) socketDialer {
	d := socketDialer{dir: dir, rel: rel}
	if filepath.IsLocal(rel) {
		d.path = strings.Split(filepath.Clean(rel), string(filepath.Separator))
	}
	return d
}

// dial connects to the socket.
func (s socketDialer) dial(ctx context.Context) (net.Conn, error) {
	fd, err := s.open()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("guest socket %s: %w", s.rel, err)
	}
	return c, nil
}

// open returns an O_PATH descriptor of the socket, or an error wrapping
// ErrUnsafeSocket if anything on the way is not what the host made.
func (s socketDialer) open() (int, error) {
	if len(s.path) == 0 || s.path[0] == "." {
		return -1, fmt.Errorf("guest socket %q: not a path beneath %s", s.rel, s.dir)
	}
	fd, err := unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("guest socket dir %s: %w", s.dir, err)
	}
	for i, name := range s.path {
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("guest socket %s: %w", s.rel, err)
		}
		fd = next
		want := uint32(unix.S_IFDIR)
		if i == len(s.path)-1 {
			want = unix.S_IFSOCK
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("guest socket %s: %w", s.rel, err)
		}
		if got := st.Mode & unix.S_IFMT; got != want {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %s is %s, not %s", ErrUnsafeSocket, filepath.Join(s.path[:i+1]...), typeName(got), typeName(want))
		}
	}
	return fd, nil
}

func typeName(t uint32) string {
	switch t {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "of an unknown type"
}

// Package pgserver starts a PostgreSQL server of Debian's postgresql
// package in a directory of its own, for the tests (internal/testenv) and
// the store benchmark (agentbox bench store): initdb, then pg_ctl start on a
// loopback port with trust auth, as the postgres user when running as root
// (the server refuses to run as root). It is not for production: operators
// run their own server and point AGENTBOX_STORE at it.
package pgserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options tune the server.
type Options struct {
	// Durable keeps fsync and synchronous commits on, as a real deployment
	// has them; off, commits return before they reach the disk (tests).
	Durable bool
	// MaxConnections is the server's max_connections; 0 means 200.
	MaxConnections int
}

// Server is a running server.
type Server struct {
	Dir  string // its directory: data/, the socket, log
	Port int
}

// Bin finds a server program of Debian's packages (they live under
// /usr/lib/postgresql/<version>/bin, not on PATH), newest version first.
func Bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	best, bestV := "", -1
	for _, m := range matches {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if err == nil && v > bestV {
			best, bestV = m, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("no %s on PATH or under /usr/lib/postgresql (apt-get install postgresql)", name)
	}
	return best, nil
}

// Start creates a server in a new directory under parent (whose name
// starts with prefix) and starts it.
func Start(parent, prefix string, opts Options) (*Server, error) {
	initdb, err := Bin("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := Bin("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir}
	if err := s.start(initdb, pgctl, opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start(initdb, pgctl string, opts Options) error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs the postgres user to start the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			return err
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	data := filepath.Join(s.Dir, "data")
	if err := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return err
	}
	maxConns := opts.MaxConnections
	if maxConns <= 0 {
		maxConns = 200
	}
	o := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=%d", port, s.Dir, maxConns)
	if !opts.Durable {
		o += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	if err := run(pgctl, "-D", data, "-o", o, "-l", filepath.Join(s.Dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return err
	}
	s.Port = port
	return nil
}

// URL is the URL of database db on the server, as the postgres superuser.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// CreateDatabase creates database name (made of [a-z0-9_]) and returns
// its URL.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := Exec(ctx, s.URL("postgres"), "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.URL(name), nil
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() { StopIn(s.Dir) }

// StopIn stops a server started in dir, if it runs, and removes dir: for a
// server a killed process left behind.
func StopIn(dir string) {
	if pgctl, err := Bin("pg_ctl"); err == nil {
		_ = command(pgctl, "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop").Run()
	}
	_ = os.RemoveAll(dir)
}

// Exec runs one statement on the database at url.
func Exec(ctx context.Context, url, sql string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

func run(args ...string) error {
	if out, err := command(args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(args[0]), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// command runs a server program as the postgres user when root.
func command(args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = os.TempDir()
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// staleAfter is how old a test or benchmark server's directory must be to
// be taken for the leftover of a killed process.
const staleAfter = 30 * time.Minute

// ReapStale stops the servers killed processes left under parent (their
// directories named prefix*, older than 30 minutes) and removes them.
func ReapStale(parent, prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) >= staleAfter {
			StopIn(d)
		}
	}
}

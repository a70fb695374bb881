package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A real PostgreSQL server for the tests: Debian's postgresql, started
// once per test binary in a temporary directory as the unprivileged
// postgres user (the server refuses to run as root), listening on a
// loopback port. Each Postgres call gets a database of its own on it.
// A server a killed run left behind is stopped by the next run
// (ReapStalePostgres, called by Postgres before it starts one).

// pgPrefix names the temporary directories of the test servers.
const pgPrefix = "agentbox-pgtest-"

// pgServer is the tests' server of this binary.
type pgServer struct {
	once sync.Once
	dir  string // data and socket directory
	port int
	err  error
}

var pg pgServer

// PostgresRequired reports whether a missing PostgreSQL must fail tests:
// where Docker is required (CI), or with AGENTBOX_REQUIRE_POSTGRES=1.
func PostgresRequired() bool {
	return DockerRequired() || os.Getenv("AGENTBOX_REQUIRE_POSTGRES") == "1"
}

// Postgres returns the URL of a fresh, empty database on the tests' server,
// starting the server if this binary has none yet. Without PostgreSQL the
// test skips (fails where it is required). The database is dropped when
// the test ends. AGENTBOX_TEST_POSTGRES, a URL of a server the tests may
// create databases on, is used instead of starting one.
func Postgres(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("AGENTBOX_TEST_POSTGRES")
	if admin == "" {
		pg.once.Do(startPostgres)
		if pg.err != nil {
			why := "postgres: " + pg.err.Error()
			if PostgresRequired() {
				t.Fatalf("%s (PostgreSQL is required here: CI=true, AGENTBOX_REQUIRE_DOCKER=1 or AGENTBOX_REQUIRE_POSTGRES=1)", why)
			}
			t.Skipf("skipping: needs PostgreSQL (apt-get install postgresql): %s", why)
		}
		admin = pg.url("postgres")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pgExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = pgExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("AGENTBOX_TEST_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func (p *pgServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

func pgExec(ctx context.Context, url, sql string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// pgBin finds Debian's server programs (not on PATH: they live under
// /usr/lib/postgresql/<version>/bin), newest version first.
func pgBin(name string) (string, error) {
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
		return "", fmt.Errorf("no %s on PATH or under /usr/lib/postgresql", name)
	}
	return best, nil
}

// startPostgres initializes and starts the tests' server.
func startPostgres() {
	ReapStalePostgres()
	initdb, err := pgBin("initdb")
	if err != nil {
		pg.err = err
		return
	}
	pgctl, _ := pgBin("pg_ctl")
	dir, err := os.MkdirTemp("", pgPrefix)
	if err != nil {
		pg.err = err
		return
	}
	run := func(args ...string) error {
		cmd := asPostgresUser(args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", filepath.Base(args[0]), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			pg.err = fmt.Errorf("running as root needs the postgres user to start the server: %w", err)
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			pg.err = err
			return
		}
	}
	port, err := freePort()
	if err != nil {
		pg.err = err
		return
	}
	data := filepath.Join(dir, "data")
	if err := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		pg.err = err
		return
	}
	// Durability off: these are test servers (the benchmark starts its own).
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, dir)
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		pg.err = err
		return
	}
	pg.dir, pg.port = dir, port
}

// StopPostgres stops the tests' server, if this binary started one, and
// removes its directory. A test binary's TestMain calls it after m.Run.
func StopPostgres() {
	if pg.dir == "" {
		return
	}
	stopPostgresIn(pg.dir)
	pg.dir = ""
}

func stopPostgresIn(dir string) {
	if pgctl, err := pgBin("pg_ctl"); err == nil {
		_ = asPostgresUser(pgctl, "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop").Run()
	}
	_ = os.RemoveAll(dir)
}

// ReapStalePostgres stops the test servers killed runs left behind (their
// directories older than staleAfter) and removes their directories.
func ReapStalePostgres() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pgPrefix+"*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		stopPostgresIn(d)
	}
}

// asPostgresUser runs a server program as the postgres user when root.
func asPostgresUser(args ...string) *exec.Cmd {
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

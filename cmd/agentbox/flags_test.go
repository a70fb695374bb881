package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/wiring"
)

// flagTypes are the types some flags must have wherever they appear: one
// size syntax, one CPU syntax, durations with a unit.
var flagTypes = map[string]string{"memory": "size", "disk": "size", "cpus": "cpus", "timeout": "duration"}

// TestFlagsAgreeAcrossCommands walks every command, hidden ones too, and
// fails when one flag name has two types, two syntaxes in the help (the
// value's name) or two shorthands; when a duration flag takes a bare
// number as pflag's does; and when --memory, --disk, --cpus or --timeout
// has another type than the one they share.
func TestFlagsAgreeAcrossCommands(t *testing.T) {
	type seen struct{ typ, syntax, short, where string }
	first := map[string]seen{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			syntax, _ := pflag.UnquoteUsage(f)
			s := seen{f.Value.Type(), syntax, f.Shorthand, c.CommandPath()}
			if want, ok := flagTypes[f.Name]; ok && s.typ != want {
				t.Errorf("%s --%s is a %s, want %s", s.where, f.Name, s.typ, want)
			}
			if _, ours := f.Value.(durationValue); s.typ == "duration" && !ours {
				t.Errorf("%s --%s is pflag's duration, which refuses a bare number without the hint: use durationVar", s.where, f.Name)
			}
			prev, ok := first[f.Name]
			if !ok {
				first[f.Name] = s
				return
			}
			if prev.typ != s.typ || prev.syntax != s.syntax || prev.short != s.short {
				t.Errorf("--%s differs: %s has type %s, syntax %q, shorthand %q; %s has %s, %q, %q",
					f.Name, prev.where, prev.typ, prev.syntax, prev.short, s.where, s.typ, s.syntax, s.short)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if len(first) < 40 || first["timeout"].typ == "" || first["data-dir"].typ == "" {
		t.Fatalf("walked too few flags (%d): %v", len(first), first)
	}
}

// runReport runs the CLI as main does and returns its exit status and
// what it printed on stderr.
func runReport(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := newRootCmd()
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(context.Background())
	code := report(&e, cmd, err)
	return code, e.String()
}

// TestUsageErrorsExit2: a bad flag, a bad value, a wrong number of
// arguments or an unknown command exits 2 on every command, saying what
// was expected and the usage line, never a parser's words.
func TestUsageErrorsExit2(t *testing.T) {
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	t.Setenv("AGENTBOX_URL", "http://127.0.0.1:1") // nothing is sent: usage is checked first
	tests := []struct {
		args  []string
		want  string
		usage string
	}{
		{[]string{"status", "--bogus", "job_1"}, "unknown flag: --bogus", "agentbox status [flags] JOB_ID"},
		{[]string{"status", "job_1", "extra"}, `agentbox status takes JOB_ID; got 2: job_1 extra`, "agentbox status [flags] JOB_ID"},
		{[]string{"list", "--limit", "many"}, "--limit many: want a whole number", "agentbox list [flags]"},
		{[]string{"list", "extra"}, "agentbox list takes no arguments; got 1: extra", "agentbox list [flags]"},
		{[]string{"logs", "--after", "x", "job_1"}, "--after x: want a whole number", "agentbox logs [flags] JOB_ID"},
		{[]string{"logs", "-f", "--no-follow", "job_1"}, "--follow and --no-follow", "agentbox logs [flags] JOB_ID"},
		{[]string{"submit", "--cpus", "x", "task"}, "--cpus x: want a positive number of CPUs such as 0.5 or 2", "agentbox submit [flags] TASK"},
		{[]string{"submit", "--memory", "lots", "task"}, "--memory lots: want a size such as 512m or 2g", "agentbox submit [flags] TASK"},
		{[]string{"submit", "--meta", "novalue", "task"}, "--meta \"novalue\": want KEY=VALUE", "agentbox submit [flags] TASK"},
		{[]string{"submit", "--json=maybe", "task"}, "--json maybe: want true or false", "agentbox submit [flags] TASK"},
		{[]string{"run", "--disk", "huge", "task"}, "--disk huge: want a size", "agentbox run [flags] TASK"},
		{[]string{"run"}, "agentbox run takes TASK; got none", "agentbox run [flags] TASK"},
		{[]string{"run", "fix", "the", "tests"}, "agentbox run takes TASK; got 3: fix the tests (quote a text of several words)", "agentbox run [flags] TASK"},
		{[]string{"exec", "--cpus", "-1", "true"}, "--cpus -1: want a positive number", "agentbox exec [flags] COMMAND [ARG...]"},
		{[]string{"exec", "--env", "NOEQUALS", "true"}, "KEY=VALUE", "agentbox exec [flags] COMMAND [ARG...]"},
		{[]string{"diff", "--format", "zip", "job_1"}, "want diff or patch", "agentbox diff [flags] JOB_ID"},
		{[]string{"serve", "--grace", "30"}, "--grace 30: give a unit, e.g. 30s or 30m", "agentbox serve [flags]"},
		{[]string{"version", "extra"}, "agentbox version takes no arguments", "agentbox version [flags]"},
		{[]string{"bogus"}, `unknown command "bogus" for "agentbox"`, "agentbox COMMAND"},
		{[]string{"lgos"}, "did you mean logs?", "agentbox COMMAND"},
		{[]string{"image", "bogus"}, `unknown command "bogus" for "agentbox image"`, "agentbox image COMMAND"},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "agentbox completion"`, "agentbox completion COMMAND"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stderr := runReport(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "usage: "+tt.usage+"\n") {
				t.Errorf("stderr lacks %q or the usage line %q:\n%s", tt.want, tt.usage, stderr)
			}
			for _, parser := range []string{"strconv", "invalid syntax", "invalid argument", "time: "} {
				if strings.Contains(stderr, parser) {
					t.Errorf("stderr has the parser's words %q:\n%s", parser, stderr)
				}
			}
		})
	}
}

// TestBadEnvironmentExits2: a variable that does not parse is a usage
// error too, named, without the parser's words.
func TestBadEnvironmentExits2(t *testing.T) {
	t.Setenv("AGENTBOX_SANDBOX_PIDS", "many")
	code, stderr := runReport(t, "list")
	if code != 2 || !strings.Contains(stderr, `AGENTBOX_SANDBOX_PIDS: "many" is not a whole number`) || strings.Contains(stderr, "strconv") {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

// TestTimeoutWantsAUnit: --timeout 5 is refused with a hint on every
// command that has --timeout, never taken as seconds.
func TestTimeoutWantsAUnit(t *testing.T) {
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	var withTimeout []string
	for _, c := range newRootCmd().Commands() {
		if c.Flags().Lookup("timeout") != nil {
			withTimeout = append(withTimeout, c.Name())
		}
	}
	for _, name := range []string{"exec", "run", "submit"} {
		if !slices.Contains(withTimeout, name) {
			t.Fatalf("%s has no --timeout: %v", name, withTimeout)
		}
	}
	for _, name := range withTimeout {
		args := []string{name, "--timeout", "5"}
		if name != "chat" {
			args = append(args, "x")
		}
		code, stderr := runReport(t, args...)
		if code != 2 || !strings.Contains(stderr, "--timeout 5: give a unit, e.g. 5s or 5m\n") {
			t.Errorf("%s: exit %d, stderr:\n%s", name, code, stderr)
		}
	}
	d := durationValue{new(time.Duration)}
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "0": 0} {
		if err := d.Set(in); err != nil || *d.p != want {
			t.Errorf("Set(%q) = %v, %v", in, *d.p, err)
		}
	}
	for in, want := range map[string]string{"1.5": "give a unit, e.g. 1.5s or 1.5m", "-5s": "not negative", "soon": "such as 30s"} {
		if err := d.Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q): %v, want %q", in, err, want)
		}
	}
}

// TestVersion: `agentbox version` and --version print the version, the
// commit and the Go toolchain, the same way.
func TestVersion(t *testing.T) {
	t.Setenv("AGENTBOX_SANDBOX_PIDS", "many") // a broken environment does not hide the version
	out, _, err := run(context.Background(), "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agentbox " + version + "\n", "\ncommit   ", "\ngo       go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	flag, _, err := run(context.Background(), "--version")
	if err != nil || flag != out {
		t.Errorf("--version = %q, %v; want %q", flag, err, out)
	}
}

// TestLogsFollowShorthand: logs -f follows, as logs does.
func TestLogsFollowShorthand(t *testing.T) {
	e := clientEnv(t)
	progressOnFollow(t, e, store.StatusComplete)
	id := e.Submit("say hello").ID
	out, errOut, err := runClient(context.Background(), "", "logs", "-f", id)
	if err != nil || out != "hello\n" || !strings.Contains(errOut, "[complete]") {
		t.Errorf("logs -f: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
}

// TestDataDirFindsTheServerToken: a client command sends the token of
// the local server whose data directory --data-dir or AGENTBOX_DATA_DIR
// names; without it, the 401 says which file it looked for and what to
// do; a refused token is named by its source, never shown.
func TestDataDirFindsTheServerToken(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	t.Setenv("AGENTBOX_TOKEN", "")
	serverDir, otherDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(serverDir, "token"), []byte(apitest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOX_DATA_DIR", otherDir)
	_, _, err := runClient(context.Background(), "", "status", id)
	if err == nil || !strings.Contains(err.Error(), "none was sent") ||
		!strings.Contains(err.Error(), "there is no "+filepath.Join(otherDir, "token")) ||
		!strings.Contains(err.Error(), "--data-dir") || exitCodeOf(err) != 1 {
		t.Errorf("without the server's data dir: %v", err)
	}
	if out, _, err := runClient(context.Background(), "", "status", "--data-dir", serverDir, id); err != nil || !strings.Contains(out, id) {
		t.Errorf("status --data-dir: %v\n%s", err, out)
	}
	t.Setenv("AGENTBOX_TOKEN_FILE", filepath.Join(serverDir, "token")) // the server's own setting
	if out, _, err := runClient(context.Background(), "", "status", id); err != nil || !strings.Contains(out, id) {
		t.Errorf("status with AGENTBOX_TOKEN_FILE: %v\n%s", err, out)
	}
	t.Setenv("AGENTBOX_TOKEN_FILE", "")
	t.Setenv("AGENTBOX_DATA_DIR", serverDir)
	if out, _, err := runClient(context.Background(), "", "status", id); err != nil || !strings.Contains(out, id) {
		t.Errorf("status with AGENTBOX_DATA_DIR: %v\n%s", err, out)
	}
	const stale = "stale-token-7f3a9c"
	t.Setenv("AGENTBOX_TOKEN", stale)
	_, _, err = runClient(context.Background(), "", "status", id)
	if err == nil || !strings.Contains(err.Error(), "refused the token from AGENTBOX_TOKEN") || strings.Contains(err.Error(), stale) {
		t.Errorf("a stale AGENTBOX_TOKEN: %v", err)
	}
	_, _, err = runClient(context.Background(), "", "list", "--token", stale)
	if err == nil || !strings.Contains(err.Error(), "refused the token given with --token") || strings.Contains(err.Error(), stale) {
		t.Errorf("a stale --token: %v", err)
	}
	os.WriteFile(filepath.Join(otherDir, "token"), []byte(stale), 0o600)
	t.Setenv("AGENTBOX_TOKEN", "")
	_, _, err = runClient(context.Background(), "", "status", "--data-dir", otherDir, id)
	if err == nil || !strings.Contains(err.Error(), "refused the token in "+filepath.Join(otherDir, "token")) || strings.Contains(err.Error(), stale) {
		t.Errorf("another server's token file: %v", err)
	}
}

// TestSubmitFollowEndsLikeRun: submit --follow ends with the summary run
// prints for the same job (render.Summary), then where its results are.
func TestSubmitFollowEndsLikeRun(t *testing.T) {
	for _, final := range []store.Status{store.StatusComplete, store.StatusError} {
		t.Run(string(final), func(t *testing.T) {
			e := clientEnv(t)
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			e.OnRequest(func(r *http.Request) {
				if r.Header.Get("Accept") != "text/event-stream" {
					return
				}
				id := strings.Split(r.URL.Path, "/")[3]
				wg.Go(func() {
					e.Start(id)
					e.Emit(id, event.Command{Command: "echo hello"})
					e.Store.UpdateJob(context.Background(), id, func(j *store.Job) error {
						j.Steps, j.Result = 3, "wrote hello.py"
						j.Usage = store.Usage{InputTokens: 1200, CacheReadTokens: 800, OutputTokens: 90, CostUSD: 0.0123}
						return nil
					})
					e.Finish(id, final, map[store.Status]string{store.StatusError: "it broke"}[final])
				})
			})
			_, errOut, err := runClient(context.Background(), "", "submit", "--follow", "say hello")
			if (err == nil) != (final == store.StatusComplete) {
				t.Errorf("err = %v", err)
			}
			id := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(errOut, "\n", 2)[0], "submitted "))
			j, err := e.Svc.Get(context.Background(), id)
			if err != nil {
				t.Fatalf("job %q: %v\n%s", id, err, errOut)
			}
			var want strings.Builder
			wiring.RunReport{Job: j}.WriteEnd(&want)
			if !regexp.MustCompile(`^\njob ` + id + " " + string(final) + ` after 3 steps, 2000 tokens in \(800 from cache\), 90 out, \$0\.0123 · \d+(ms|s)\n`).MatchString(want.String()) {
				t.Fatalf("run's summary: %q", want.String())
			}
			if !strings.HasSuffix(errOut, want.String()+"download: agentbox download "+id+"\ndiff: agentbox diff "+id+"\n") {
				t.Errorf("submit --follow does not end with run's summary %q:\n%s", want.String(), errOut)
			}
		})
	}
}

// TestErrorsShowControls: an error the CLI prints may quote what a
// sandbox wrote: the server's refusal of a file names a symlink's target,
// any bytes but NUL. Printed as they came, an OSC 52 sequence in it would
// write the user's clipboard, and a CR and an erase-line sequence put a
// line of the sandbox's in place of the error. They are shown, as the
// CLI shows a sandbox's output (render.Visible), never acted on.
func TestErrorsShowControls(t *testing.T) {
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	target := "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07/etc\r\x1b[2Kall good"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorDetail{Code: wire.CodeNotFound,
			Message: "out is a symlink to " + target + ", which is outside the workspace or missing: it is not followed"}})
	}))
	defer srv.Close()
	t.Setenv("AGENTBOX_URL", srv.URL)
	t.Setenv("AGENTBOX_TOKEN", "a-token-of-the-test")
	code, stderr := runReport(t, "download", "--file", "out", "-o", filepath.Join(t.TempDir(), "out"), "job_1")
	if code == 0 || !strings.Contains(stderr, "symlink to") {
		t.Fatalf("exit %d, stderr %q; want the refusal", code, stderr)
	}
	if strings.ContainsAny(stderr, "\x1b\x07\r") {
		t.Errorf("stderr has the sandbox's control characters as they came: %q", stderr)
	}
	if !strings.Contains(stderr, "^[]52;c;") {
		t.Errorf("stderr %q; want the escape shown as ^[", stderr)
	}
}

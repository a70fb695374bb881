package jobs_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// withRepos gives the scheduler and its service a host git over e's
// data dir configured by cfg; it returns the git dirs' directory.
func (e *env) withRepos(t *testing.T, cfg githost.Config) (*jobs.Repos, func(*jobs.SchedulerConfig)) {
	t.Helper()
	cfg.KnownHostsFile = filepath.Join(e.dir, "ssh_known_hosts")
	cfg.Forbidden = append(cfg.Forbidden, e.dir)
	h, err := githost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &jobs.Repos{Host: h, Dir: filepath.Join(e.dir, "git")}
	return r, func(c *jobs.SchedulerConfig) { c.Repos = r; c.Grace = 100 * time.Millisecond }
}

func (e *env) startWithRepos(t *testing.T, cfg githost.Config) (*jobs.Service, *jobs.Repos, func()) {
	t.Helper()
	r, mod := e.withRepos(t, cfg)
	svc, stop := e.start(t, jobs.ShellAgent{}, mod)
	return svc, r, stop
}

// secretsScript is a task that fails unless git works in the sandbox on
// a clean checkout and none of secrets is anywhere the sandbox can read
// (noSecretsScript).
func secretsScript(secrets ...string) string {
	return `set -u
git log --oneline -1 || { echo "git log failed"; exit 3; }
st=$(git status --porcelain) || exit 4
[ -z "$st" ] || { echo "not clean: $st"; exit 5; }
git branch --show-current
` + noSecretsScript(secrets...) + `
echo changed >> README.md
rm gone.txt
mkdir -p src && echo 'print("new")' > src/new.py
printf '\x00\x01' > blob.bin
echo secrets-checked`
}

// noSecretsScript is a script that exits 6 if one of secrets is anywhere
// the sandbox can read: the environment, any process's, the workspace
// (its .git too), home, /tmp. The secrets are in the script
// base64-encoded, and never exported.
func noSecretsScript(secrets ...string) string {
	var enc []string
	for _, s := range secrets {
		enc = append(enc, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	return `found=0
for b in ` + strings.Join(enc, " ") + `; do
  s=$(printf %s "$b" | base64 -d)
  if env | grep -qF -- "$s"; then echo "a secret is in the environment"; found=1; fi
  for f in /proc/[0-9]*/environ; do
    if { tr '\0' '\n' < "$f"; } 2>/dev/null | grep -qF -- "$s"; then echo "a secret is in $f"; found=1; fi
  done
  if grep -rqsF -- "$s" /workspace "$HOME" /tmp; then echo "a secret is in a file: $(grep -rlsF -- "$s" /workspace "$HOME" /tmp)"; found=1; fi
done
[ $found = 0 ] || exit 6`
}

// TestRepoJobsKeepCredentialsOnTheHost clones over SSH with a key file,
// over HTTP with a token and over HTTP through the host's credential
// helper, runs a job on each clone, and checks from inside the sandbox
// that no secret is there, then the diff.
func TestRepoJobsKeepCredentialsOnTheHost(t *testing.T) {
	e := newEnv(t)
	sshd := gittest.StartSSH(t)
	web := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	helped := gittest.StartHTTP(t, "alice", "")
	files := gittest.Files("README.md", "hello\n", "gone.txt", "bye\n")
	home := t.TempDir()
	creds := filepath.Join(home, "creds")
	writeFile(t, creds, strings.Replace(helped.BaseURL, "http://", "http://alice:"+helped.Password+"@", 1)+"\n")
	writeFile(t, filepath.Join(home, ".gitconfig"), "[credential]\n\thelper = store --file "+creds+"\n")
	cases := []struct {
		name, url, bare string
		cfg             githost.Config
		secrets         []string
	}{
		{"ssh key file", sshd.URL("r.git"), sshd.Path("r.git"), githost.Config{SSHKey: sshd.KeyFile, SSHKnownHosts: sshd.KnownHosts},
			[]string{keyLine(sshd.Key)}},
		{"http token", web.URL("r.git"), web.Path("r.git"), githost.Config{Token: web.Password}, []string{web.Password}},
		{"http credential helper", helped.URL("r.git"), helped.Path("r.git"), githost.Config{}, []string{helped.Password}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cfg.Token == "" && c.cfg.SSHKey == "" {
				t.Setenv("HOME", home)
			}
			base := gittest.Commit(t, c.bare, "main", files)
			svc, r, _ := e.startWithRepos(t, c.cfg)
			j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: secretsScript(c.secrets...), Repo: &store.Repo{URL: c.url, Ref: "main"}})
			if err != nil {
				t.Fatal(err)
			}
			j = await(t, svc, j.ID)
			out := outputOf(t, svc, j.ID)
			if j.Status != store.StatusComplete || !strings.Contains(out, "secrets-checked") {
				t.Fatalf("job %s: %s\n%s", j.Status, j.Error, out)
			}
			if !strings.Contains(out, "agentbox/"+j.ID) {
				t.Errorf("the sandbox's checkout is not on the job's branch:\n%s", out)
			}
			if j.Git.BaseCommit != base || j.Git.Branch != "agentbox/"+j.ID {
				t.Errorf("git %+v, want base %s", j.Git, base)
			}
			clone := gitEvent(t, svc, j.ID, "clone")
			if clone.Commit != base || clone.Ref != "main" || clone.URL != githost.Redact(c.url) || clone.Error != "" {
				t.Errorf("clone event %+v", clone)
			}
			var d bytes.Buffer
			if err := svc.Diff(bg, j.ID, false, &d); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"+changed", "deleted file mode", "-bye", "+++ b/src/new.py", "Binary files /dev/null and b/blob.bin differ"} {
				if !strings.Contains(d.String(), want) {
					t.Errorf("diff lacks %q:\n%s", want, d.String())
				}
			}
			if _, err := svc.Delete(bg, j.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(r.Dir, j.ID+".git")); !os.IsNotExist(err) {
				t.Errorf("the git dir outlived DELETE: %v", err)
			}
		})
	}
}

// keyLine is a line from the middle of a private key file.
func keyLine(key []byte) string {
	lines := strings.Split(strings.TrimSpace(string(key)), "\n")
	return lines[len(lines)/2]
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func outputOf(t *testing.T, svc *jobs.Service, id string) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range eventsOf(t, svc, id) {
		var p event.Output
		if ev.Type == event.TypeOutput && json.Unmarshal(ev.Payload, &p) == nil {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func gitEvent(t *testing.T, svc *jobs.Service, id, action string) event.Git {
	t.Helper()
	var found []event.Git
	for _, ev := range eventsOf(t, svc, id) {
		var g event.Git
		if ev.Type == event.TypeGit && json.Unmarshal(ev.Payload, &g) == nil && g.Action == action {
			found = append(found, g)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d git %s events, want 1: %+v", len(found), action, found)
	}
	return found[0]
}

func TestCloneFailureEndsTheJobInError(t *testing.T) {
	e := newFakeEnv(t)
	web := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	gittest.Commit(t, web.Path("r.git"), "main", gittest.Files("README.md", "hello\n"))
	svc, _, _ := e.startWithRepos(t, githost.Config{Token: "the-wrong-token"})
	url := strings.Replace(web.URL("r.git"), "http://", "http://someone@", 1)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "echo never", Repo: &store.Repo{URL: url}})
	if err != nil {
		t.Fatal(err)
	}
	j = await(t, svc, j.ID)
	if j.Status != store.StatusError || !strings.Contains(j.Error, "clone") || strings.Contains(j.Error, "the-wrong-token") || strings.Contains(j.Error, "someone@") {
		t.Fatalf("job %s: %q", j.Status, j.Error)
	}
	if ev := gitEvent(t, svc, j.ID, "clone"); ev.Error == "" || strings.Contains(ev.URL, "someone") || strings.Contains(ev.Error, "the-wrong-token") {
		t.Errorf("clone event %+v", ev)
	}
	if err := svc.Diff(bg, j.ID, false, &bytes.Buffer{}); !errors.Is(err, jobs.ErrNoDiff) {
		t.Errorf("diff of a job whose clone failed: %v", err)
	}
	e.assertNoSandboxes(t)
}

// TestSnapshotJobDiff: a job that starts from no repository gets a
// snapshot of its starting workspace as its base; its diff, and the
// statuses of the diff of jobs that have not ended or are deleted.
func TestSnapshotJobDiff(t *testing.T) {
	e := newFakeEnv(t)
	svc, _, stop := e.startWithRepos(t, githost.Config{})
	j := await(t, svc, submit(t, svc, "echo hello > out.txt; mkdir -p d && printf '\\x00' > d/bin", store.Limits{}))
	if j.Status != store.StatusComplete || j.Git.BaseCommit == "" {
		t.Fatalf("job %s %+v", j.Status, j.Git)
	}
	if ev := gitEvent(t, svc, j.ID, "snapshot"); ev.Commit != j.Git.BaseCommit {
		t.Errorf("snapshot event %+v", ev)
	}
	var d bytes.Buffer
	if err := svc.Diff(bg, j.ID, false, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.String(), "+hello") || !strings.Contains(d.String(), "Binary files /dev/null and b/d/bin differ") {
		t.Errorf("diff:\n%s", d.String())
	}
	if err := svc.Diff(bg, j.ID, true, &d); !errors.Is(err, jobs.ErrNotRepo) {
		t.Errorf("patch of a job without a repository: %v", err)
	}
	stop()
	pending := submit(t, svc, "true", store.Limits{})
	if err := svc.Diff(bg, pending, false, &d); !errors.Is(err, jobs.ErrNotEnded) {
		t.Errorf("diff of a pending job: %v", err)
	}
	if _, err := svc.Delete(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Diff(bg, j.ID, false, &d); !errors.Is(err, jobs.ErrDeleted) {
		t.Errorf("diff of a deleted job: %v", err)
	}
}

// TestRestartDoesNotCloneAgain: a job handed back by a shutdown runs
// again on the workspace it had, not on a fresh clone.
func TestRestartDoesNotCloneAgain(t *testing.T) {
	e := newFakeEnv(t)
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	svc, _, stop := e.startWithRepos(t, githost.Config{AllowLocal: true})
	task := "if [ -e marker ]; then grep -q first README.md && echo kept; else echo first >> README.md; touch marker; sleep 300; fi"
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: task, Repo: &store.Repo{URL: repo}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.workspaceHas(j.ID, "marker") })
	stop()
	svc, _, _ = e.startWithRepos(t, githost.Config{AllowLocal: true})
	j = await(t, svc, j.ID)
	if out := outputOf(t, svc, j.ID); j.Status != store.StatusComplete || !strings.Contains(out, "kept") {
		t.Fatalf("after the restart: %s %q\n%s", j.Status, j.Error, out)
	}
	gitEvent(t, svc, j.ID, "clone") // one clone, not two
}

// submitOnly is a service without workers (no Docker needed) whose
// host git is configured by cfg, for what Submit checks.
func submitOnly(t *testing.T, cfg githost.Config) *jobs.Service {
	t.Helper()
	e := &env{dir: t.TempDir()}
	st, err := sqlite.Open(bg, filepath.Join(e.dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, _ := e.withRepos(t, cfg)
	svc := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(e.dir), Repos: r})
	return svc
}

func TestSubmitRefusesBadRepositories(t *testing.T) {
	svc := submitOnly(t, githost.Config{AllowLocal: false})
	for _, repo := range []store.Repo{
		{}, {URL: "ext::sh -c id"}, {URL: "https://u:p@example.com/r.git"}, {URL: "/srv/r.git"}, {URL: "relative"},
		{URL: "https://example.com/r.git", Ref: "-x"}, {URL: "https://example.com/r.git", Ref: "a..b"},
		{URL: "https://example.com/r.git", Branch: "HEAD"}, {URL: "https://example.com/r.git", Branch: "a b"},
	} {
		_, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Repo: &repo})
		if !errors.Is(err, jobs.ErrBadRepo) {
			t.Errorf("%+v: %v", repo, err)
		}
	}
	if _, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Repo: &store.Repo{URL: "git@github.com:o/r.git", Ref: "v1.2", Branch: "fix/x"}}); err != nil {
		t.Error(err)
	}
}

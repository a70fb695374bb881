package sandboximage

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHashDeterministic(t *testing.T) {
	if a, b := Hash(), Hash(); a != b || len(a) != 64 {
		t.Fatalf("Hash() = %q then %q, want the same 64 hex digits", a, b)
	}
	again, err := HashFS(FS)
	if err != nil {
		t.Fatal(err)
	}
	if again != Hash() {
		t.Fatalf("HashFS(FS) = %s, Hash() = %s", again, Hash())
	}
}

func TestHashFSChanges(t *testing.T) {
	base := fstest.MapFS{
		"Dockerfile": {Data: []byte("FROM x\n")},
		"conf/a":     {Data: []byte("a")},
	}
	h0 := mustHash(t, base)
	// The same files in a different map (iteration order) hash the same.
	if h := mustHash(t, fstest.MapFS{"conf/a": base["conf/a"], "Dockerfile": base["Dockerfile"]}); h != h0 {
		t.Fatalf("same files, different hash: %s vs %s", h, h0)
	}
	cases := map[string]fstest.MapFS{
		"content": {"Dockerfile": {Data: []byte("FROM y\n")}, "conf/a": base["conf/a"]},
		"name":    {"Dockerfile": base["Dockerfile"], "conf/b": base["conf/a"]},
		"added":   {"Dockerfile": base["Dockerfile"], "conf/a": base["conf/a"], "c": {Data: nil}},
		"removed": {"Dockerfile": base["Dockerfile"]},
		"boundary": {
			"Dockerfile": {Data: []byte("FROM x\n")},
			"conf":       {Mode: fs.ModeDir | 0o755}, // directories are skipped
			"conf/aa":    {Data: []byte("")},
		},
	}
	for name, fsys := range cases {
		t.Run(name, func(t *testing.T) {
			if h := mustHash(t, fsys); h == h0 {
				t.Fatalf("hash did not change: %s", h)
			}
		})
	}
}

func mustHash(t *testing.T, fsys fs.FS) string {
	t.Helper()
	h, err := HashFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestDockerfileInstallsRequiredPackages(t *testing.T) {
	data, err := fs.ReadFile(FS, "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	words := map[string]bool{}
	for _, w := range strings.Fields(df) {
		words[w] = true
	}
	for _, pkg := range []string{
		"python3", "python3-pip", "python3-venv", "python3-pytest", "python3-flask",
		"python3-requests", "python3-numpy", "python3-pandas",
		"nodejs", "npm", "node-typescript",
		"git", "curl", "ca-certificates", "build-essential", "procps", "less", "file", "unzip", "zip",
		"xvfb", "openbox", "xdotool", "x11vnc", "novnc", "websockify",
		"jupyter-notebook", "python3-jupyter-server", "python3-ipykernel",
		"scrot", "fonts-dejavu-core",
	} {
		if !words[pkg] {
			t.Errorf("Dockerfile does not install %s", pkg)
		}
	}
	for _, re := range []string{
		`(?m)^ARG BASE=debian:bookworm-slim$`,
		`(?m)^FROM \$\{BASE\}$`,
		`useradd [^\n]*--uid 1000 [^\n]*agent`,
		`--no-install-recommends`,
		`rm -rf /var/lib/apt/lists/\*`,
		`(?m)^USER 1000:1000$`,
		`(?m)^WORKDIR /workspace$`,
		`LANG=C\.UTF-8`,
		`HOME=/home/agent`,
		`mkdir -p [^\n]*/run/agentbox`,
		`mkdir -p [^\n]*/opt/agentbox`,
	} {
		if !regexp.MustCompile(re).MatchString(df) {
			t.Errorf("Dockerfile does not match %s", re)
		}
	}
}

func TestCopiedFilesAreEmbedded(t *testing.T) {
	data, err := fs.ReadFile(FS, "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY\s+(\S+)`).FindAllStringSubmatch(string(data), -1) {
		if _, err := fs.Stat(FS, m[1]); err != nil {
			t.Errorf("Dockerfile copies %s, which is not embedded: %v", m[1], err)
		}
	}
}

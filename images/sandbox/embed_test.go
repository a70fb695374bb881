package sandboximage

import (
	"io/fs"
	"regexp"
	"slices"
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

func readDef(t *testing.T, name string) string {
	t.Helper()
	data, err := fs.ReadFile(FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDockerfilesInstallRequiredPackages checks that each layer installs
// what its jobs need: a coding job the core's, the computer and python
// tools the desktop layer's.
func TestDockerfilesInstallRequiredPackages(t *testing.T) {
	layers := map[string][]string{
		CoreDockerfile: {"python3", "python3-pip", "python3-venv", "python3-pytest", "python3-flask",
			"python3-requests", "python3-numpy", "python3-pandas",
			"nodejs", "npm", "node-typescript",
			"git", "curl", "ca-certificates", "build-essential", "procps", "less", "file", "unzip", "zip"},
		"Dockerfile": {"xvfb", "openbox", "xdotool", "x11vnc", "novnc", "websockify",
			"jupyter-notebook", "python3-jupyter-server", "python3-ipykernel",
			"scrot", "fonts-dejavu-core", "python3-matplotlib"},
	}
	for name, pkgs := range layers {
		words := map[string]bool{}
		for _, w := range strings.Fields(readDef(t, name)) {
			words[w] = true
		}
		for _, pkg := range pkgs {
			if !words[pkg] {
				t.Errorf("%s does not install %s", name, pkg)
			}
		}
	}
	both := []string{`(?m)^FROM \$\{BASE\}$`, `--no-install-recommends`, `rm -rf /var/lib/apt/lists/\*`,
		`(?m)^USER 1000:1000$`, `force-unsafe-io`, `rm -rf [^\n]*/etc/dpkg/dpkg.cfg.d/agentbox-build`}
	checks := map[string][]string{
		CoreDockerfile: append([]string{
			`(?m)^ARG BASE=debian:bookworm-slim$`,
			`useradd [^\n]*--uid 1000 [^\n]*agent`,
			`(?m)^WORKDIR /workspace$`,
			`LANG=C\.UTF-8`,
			`HOME=/home/agent`,
			`mkdir -p [^\n]*/run/agentbox`,
			`mkdir -p [^\n]*/opt/agentbox`,
		}, both...),
		"Dockerfile": append([]string{`(?m)^USER root$`}, both...),
	}
	for name, res := range checks {
		df := readDef(t, name)
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(df) {
				t.Errorf("%s does not match %s", name, re)
			}
		}
	}
}

// TestCopiedFilesAreEmbedded checks that what each Dockerfile copies is
// embedded, and that the core copies only CoreFiles (its build context).
func TestCopiedFilesAreEmbedded(t *testing.T) {
	for _, name := range []string{"Dockerfile", CoreDockerfile} {
		for _, m := range regexp.MustCompile(`(?m)^COPY\s+(\S+)`).FindAllStringSubmatch(readDef(t, name), -1) {
			if _, err := fs.Stat(FS, m[1]); err != nil {
				t.Errorf("%s copies %s, which is not embedded: %v", name, m[1], err)
			}
			if name == CoreDockerfile && !slices.Contains(CoreFiles, m[1]) {
				t.Errorf("%s copies %s, which is not in CoreFiles", name, m[1])
			}
		}
	}
}

// TestCoreHash checks that the core's hash covers the core's files only:
// the desktop layer's files change the full hash, not the core's.
func TestCoreHash(t *testing.T) {
	if CoreHash() == Hash() || len(CoreHash()) != 64 {
		t.Fatalf("CoreHash %s, Hash %s: want two different hashes", CoreHash(), Hash())
	}
	core := fstest.MapFS{}
	for _, n := range CoreFiles {
		core[n] = &fstest.MapFile{Data: []byte(readDef(t, n))}
	}
	if h := mustHash(t, core); h != CoreHash() {
		t.Errorf("hash of the core files alone %s, CoreHash %s", h, CoreHash())
	}
	core["Dockerfile"] = &fstest.MapFile{Data: []byte("FROM other\n")}
	if h, _ := HashFiles(core, CoreFiles); h != CoreHash() {
		t.Errorf("a change to the desktop layer's Dockerfile changed the core's hash")
	}
}

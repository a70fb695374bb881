package image

import (
	"bytes"
	"context"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
	"github.com/agentbox/agentbox/internal/config"
)

func TestChooseFrom(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/mmdebstrap", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	tests := []struct {
		from    string
		look    func(string) (string, error)
		want    string
		wantErr string
	}{
		{FromAuto, found, FromArchive, ""},
		{FromAuto, missing, FromRegistry, ""},
		{FromArchive, found, FromArchive, ""},
		{FromArchive, missing, "", "mmdebstrap not found"},
		{FromRegistry, found, FromRegistry, ""},
		{FromRegistry, missing, FromRegistry, ""},
		{"ftp", found, "", `unknown image source "ftp"`},
	}
	for _, tt := range tests {
		got, err := chooseFrom(tt.from, tt.look)
		if got != tt.want || !errMatches(err, tt.wantErr) {
			t.Errorf("chooseFrom(%q) = %q, %v; want %q, error %q", tt.from, got, err, tt.want, tt.wantErr)
		}
	}
}

func errMatches(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

func TestContextTar(t *testing.T) {
	names, _ := sandboximage.Files(sandboximage.FS)
	r, err := contextTar(sandboximage.FS, names)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, r.Len())
	r.Read(first)
	again, _ := contextTar(sandboximage.FS, names)
	second := make([]byte, again.Len())
	again.Read(second)
	if !bytes.Equal(first, second) {
		t.Fatal("two build contexts of the same files differ")
	}
	files, err := readTar(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(names) {
		t.Fatalf("context has %d files, definition %d", len(files), len(names))
	}
	for _, name := range names {
		want, _ := fs.ReadFile(sandboximage.FS, name)
		if files[name] != string(want) {
			t.Errorf("context file %s differs from the embedded one", name)
		}
	}
	if !strings.Contains(files["Dockerfile"], "FROM ${BASE}") {
		t.Error("context Dockerfile lacks FROM ${BASE}")
	}
}

func TestFileMode(t *testing.T) {
	if m := fileMode([]byte("#!/bin/sh\n")); m != 0o755 {
		t.Errorf("script mode %o, want 755", m)
	}
	if m := fileMode([]byte("path-exclude=x\n")); m != 0o644 {
		t.Errorf("file mode %o, want 644", m)
	}
}

func TestBuildOptions(t *testing.T) {
	o := buildOptions(coreLayer("img:t"), "agentbox-base:bookworm-abc", Options{Ref: "img:t"})
	if o.NetworkMode != "host" || o.Version != build.BuilderV1 || !o.Remove || !o.ForceRemove {
		t.Errorf("options %+v: want host network, legacy builder, intermediate containers removed", o)
	}
	if o.Labels[LabelHash] != sandboximage.CoreHash() || o.Labels[LabelLayer] != LayerCore || len(o.Tags) != 1 || o.Tags[0] != "img-core:t" ||
		o.Dockerfile != sandboximage.CoreDockerfile {
		t.Errorf("labels %v tags %v dockerfile %s", o.Labels, o.Tags, o.Dockerfile)
	}
	if b := o.BuildArgs["BASE"]; b == nil || *b != "agentbox-base:bookworm-abc" {
		t.Errorf("BASE build arg = %v", b)
	}
	full := buildOptions(fullLayer("img:t", "img-core:t"), "img-core:t", Options{Ref: "img:t", Force: true})
	if b := full.BuildArgs["BASE"]; b == nil || *b != "img-core:t" || full.PullParent || full.Labels[LabelHash] != sandboximage.Hash() ||
		full.Labels[LabelLayer] != LayerDesktop || full.Tags[0] != "img:t" || full.Dockerfile != "Dockerfile" {
		t.Errorf("desktop layer options %+v: want BASE the core, nothing pulled, the full hash", full)
	}
	reg := buildOptions(coreLayer("img:t"), "", Options{Ref: "img:t", Force: true})
	if _, ok := reg.BuildArgs["BASE"]; ok || !reg.NoCache || !reg.PullParent {
		t.Errorf("registry+force options %+v: want default BASE, no cache, pull", reg)
	}
}

func TestMmdebstrapArgsAndTag(t *testing.T) {
	def := mmdebstrapArgs(DefaultMirror)
	joined := strings.Join(def, " ")
	for _, want := range []string{"--variant=minbase", "--include=ca-certificates", "bookworm - ", "debian-security bookworm-security"} {
		if !strings.Contains(joined, want) {
			t.Errorf("default args %q lack %q", joined, want)
		}
	}
	custom := mmdebstrapArgs("http://mirror.example/debian/")
	if c := strings.Join(custom, " "); strings.Contains(c, "security") || !strings.Contains(c, "deb http://mirror.example/debian bookworm main") {
		t.Errorf("custom mirror args %q", c)
	}
	tag := baseTag(def)
	if !regexp.MustCompile(`^agentbox-base:bookworm-[0-9a-f]{12}$`).MatchString(tag) {
		t.Errorf("base tag %q", tag)
	}
	if tag != baseTag(mmdebstrapArgs(DefaultMirror+"/")) || tag == baseTag(custom) {
		t.Error("base tag must depend on the mirror, not on a trailing slash")
	}
}

func TestDecodeStreamError(t *testing.T) {
	stream := `{"stream":"Step 1/3 : FROM base\n"}
{"stream":"Step 2/3 : RUN apt-get install -y nosuchpkg\n"}
{"stream":"Reading package lists...\n"}
{"stream":"E: Unable to locate package nosuchpkg\n"}
{"errorDetail":{"code":100,"message":"The command '/bin/sh -c apt-get install -y nosuchpkg' returned a non-zero code: 100"},"error":"The command '/bin/sh -c apt-get install -y nosuchpkg' returned a non-zero code: 100"}
`
	var out bytes.Buffer
	_, err := decodeStream(strings.NewReader(stream), &out)
	if err == nil {
		t.Fatal("no error for an error message")
	}
	for _, want := range []string{"Step 2/3 : RUN apt-get install", "non-zero code: 100", "E: Unable to locate package nosuchpkg"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "Reading package lists...") {
		t.Errorf("output %q lacks the build's lines", out.String())
	}
}

func TestDecodeStreamProgress(t *testing.T) {
	stream := `{"status":"Pulling from library/debian","id":"bookworm-slim"}
{"status":"Downloading","progressDetail":{"current":1,"total":9},"id":"abc"}
{"status":"Downloading","progressDetail":{"current":5,"total":9},"id":"abc"}
{"status":"Pull complete","id":"abc"}
{"aux":{"ID":"sha256:feed"}}
`
	var out bytes.Buffer
	id, err := decodeStream(strings.NewReader(stream), &out)
	if err != nil || id != "sha256:feed" {
		t.Fatalf("decodeStream = %q, %v", id, err)
	}
	want := "bookworm-slim: Pulling from library/debian\nabc: Downloading\nabc: Pull complete\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestBuildUpToDateIsNoOp(t *testing.T) {
	f := newFake(t)
	f.images["img:t"] = map[string]string{LabelHash: sandboximage.Hash()}
	f.images["img-core:t"] = map[string]string{LabelHash: sandboximage.CoreHash()}
	var out bytes.Buffer
	res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry, Progress: &out})
	if err != nil || res.Built || res.Hash != sandboximage.Hash() {
		t.Fatalf("Build = %+v, %v; want not built", res, err)
	}
	if len(f.builds) != 0 || !strings.Contains(out.String(), "image img:t is up to date") {
		t.Errorf("builds %d, output %q", len(f.builds), out.String())
	}
}

func TestBuildRegistry(t *testing.T) {
	f := newFake(t)
	f.images["img:t"] = map[string]string{LabelHash: "old"}
	res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry})
	if err != nil || !res.Built || res.ID != "sha256:img:t" || res.Core == nil || !res.Core.Built || res.Core.Ref != "img-core:t" {
		t.Fatalf("Build = %+v, %v", res, err)
	}
	if len(f.builds) != 2 || f.builds[0].BuildArgs != nil || f.contexts[0][sandboximage.CoreDockerfile] == "" {
		t.Fatalf("builds %+v", f.builds)
	}
	st, err := Inspect(context.Background(), f, "img:t")
	if err != nil || !st.Present || !st.Current {
		t.Errorf("Inspect after build = %+v, %v", st, err)
	}
}

func TestBuildFailureNamesStep(t *testing.T) {
	f := newFake(t)
	f.buildStream = `{"stream":"Step 3/9 : RUN apt-get update\n"}` + "\n" + `{"error":"boom","errorDetail":{"message":"boom"}}` + "\n"
	_, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromRegistry})
	if err == nil || !strings.Contains(err.Error(), "build image img-core:t: Step 3/9 : RUN apt-get update: boom") {
		t.Fatalf("error %v", err)
	}
}

func TestBuildChecksFromFirst(t *testing.T) {
	f := newFake(t)
	f.images["img:t"] = map[string]string{LabelHash: sandboximage.Hash()}
	f.images["img-core:t"] = map[string]string{LabelHash: sandboximage.CoreHash()}
	if _, err := Build(context.Background(), f, Options{Ref: "img:t", From: "ftp"}); err == nil || !strings.Contains(err.Error(), `unknown image source "ftp"`) {
		t.Fatalf("error %v", err)
	}
	// A current image needs no mmdebstrap, even when asked for the archive.
	t.Setenv("PATH", t.TempDir())
	if res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromArchive}); err != nil || res.Built {
		t.Fatalf("Build = %+v, %v", res, err)
	}
}

func TestInspectMissing(t *testing.T) {
	st, err := Inspect(context.Background(), newFake(t), "nope:1")
	if err != nil || st.Present || st.Current {
		t.Fatalf("Inspect = %+v, %v; want absent, no error", st, err)
	}
}

func TestEngineUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = Build(context.Background(), cli, Options{From: FromRegistry})
	if err == nil || !strings.Contains(err.Error(), "container engine not reachable at unix://"+sock) {
		t.Fatalf("error %v", err)
	}
}

func TestDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Ref != config.DefaultImage || o.From != FromAuto || o.Mirror != DefaultMirror || o.Progress == nil || o.Layer != LayerDesktop {
		t.Fatalf("defaults %+v", o)
	}
}

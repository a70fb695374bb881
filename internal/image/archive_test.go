package image

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMmdebstrap puts a shell script named mmdebstrap first on PATH.
func fakeMmdebstrap(t *testing.T, body string) {
	dir := t.TempDir()
	script := "#!/bin/sh\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestArchiveStreamsIntoImport(t *testing.T) {
	fakeMmdebstrap(t, `echo "I: building" >&2; printf 'TAR-BYTES'`)
	f := newFake(t)
	var out bytes.Buffer
	res, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromArchive, Progress: &out})
	if err != nil || !res.Built {
		t.Fatalf("Build = %+v, %v\n%s", res, err, out.String())
	}
	tag := baseTag(mmdebstrapArgs(DefaultMirror))
	if len(f.imports) != 1 || string(f.imports[0].data) != "TAR-BYTES" || f.imports[0].ref != tag {
		t.Fatalf("imports %+v", f.imports)
	}
	if ch := strings.Join(f.imports[0].opts.Changes, ";"); !strings.Contains(ch, "ENV PATH=/usr/local/sbin:") {
		t.Errorf("import changes %q lack PATH", ch)
	}
	if b := f.builds[0].BuildArgs["BASE"]; b == nil || *b != tag {
		t.Errorf("BASE = %v, want %s", b, tag)
	}
	if !strings.Contains(out.String(), "I: building") {
		t.Errorf("mmdebstrap's stderr not in progress: %q", out.String())
	}
	// The next build reuses the base.
	delete(f.images, "img:t")
	if _, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromArchive}); err != nil || len(f.imports) != 1 {
		t.Fatalf("second build: %v, %d imports", err, len(f.imports))
	}
}

func TestArchiveMmdebstrapFails(t *testing.T) {
	fakeMmdebstrap(t, `printf 'partial'; echo "E: cannot reach mirror" >&2; exit 2`)
	f := newFake(t)
	_, err := Build(context.Background(), f, Options{Ref: "img:t", From: FromArchive})
	if err == nil || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "E: cannot reach mirror") {
		t.Fatalf("error %v", err)
	}
	if len(f.imports) != 1 || f.imports[0].err == nil {
		t.Errorf("the upload of a failed mmdebstrap must fail: %+v", f.imports)
	}
	if len(f.builds) != 0 {
		t.Error("built on a failed base")
	}
}

func TestArchiveMissingMmdebstrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Build(context.Background(), newFake(t), Options{From: FromArchive})
	if !errors.Is(err, ErrNoMmdebstrap) {
		t.Fatalf("error %v, want ErrNoMmdebstrap", err)
	}
}

func TestArchiveCancelStopsMmdebstrap(t *testing.T) {
	fakeMmdebstrap(t, `echo ready >&2; exec sleep 3600`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newSignalWriter("ready")
	f := newFake(t)
	errc := make(chan error, 1)
	go func() {
		_, err := Build(ctx, f, Options{From: FromArchive, Progress: out})
		errc <- err
	}()
	<-out.seen
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestArchiveImportFailureStopsMmdebstrap(t *testing.T) {
	fakeMmdebstrap(t, `exec sleep 3600`)
	f := newFake(t)
	f.importFail = errors.New("engine says no")
	_, err := Build(context.Background(), f, Options{From: FromArchive})
	if err == nil || !strings.Contains(err.Error(), "engine says no") {
		t.Fatalf("error %v", err)
	}
}

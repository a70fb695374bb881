package image

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	sandboximage "github.com/agentbox/agentbox/images/sandbox"
)

// slowBuild is a Gate's Build that waits for release, then makes the full
// image on the fake engine (or fails with fail).
type slowBuild struct {
	f       *fakeEngine
	ref     string
	release chan struct{}
	fail    error
	mu      sync.Mutex
	calls   int
}

func (b *slowBuild) build(ctx context.Context, w io.Writer) error {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	io.WriteString(w, "Step 1/3 : FROM core\n")
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-b.release:
	}
	if b.fail != nil {
		return b.fail
	}
	b.f.mu.Lock()
	b.f.images[b.ref] = map[string]string{LabelHash: sandboximage.Hash()}
	b.f.mu.Unlock()
	return nil
}

func newGateTest(t *testing.T) (*Gate, *fakeEngine, *slowBuild) {
	f := newFake(t)
	f.images["img-core:t"] = map[string]string{LabelHash: sandboximage.CoreHash()}
	b := &slowBuild{f: f, ref: "img:t", release: make(chan struct{})}
	g := NewGate(GateConfig{Engine: f, Ref: "img:t", Build: b.build})
	t.Cleanup(g.Close)
	return g, f, b
}

// TestGatePicksCoreWithoutDesktop: with the core current and the full
// image missing, a sandbox needing no desktop gets the core at once, and
// a job's own image is left alone.
func TestGatePicksCoreWithoutDesktop(t *testing.T) {
	g, _, b := newGateTest(t)
	for _, ref := range []string{"", "img:t"} {
		got, err := g.Image(t.Context(), ref, false, func(string) { t.Error("a sandbox without desktop waited") })
		if err != nil || got != "img-core:t" {
			t.Fatalf("Image(%q, no desktop) = %q, %v; want the core", ref, got, err)
		}
	}
	if got, err := g.Image(t.Context(), "python-ml:latest", true, nil); err != nil || got != "python-ml:latest" {
		t.Fatalf("Image(user image) = %q, %v", got, err)
	}
	if b.calls != 0 {
		t.Errorf("%d builds started; want none", b.calls)
	}
}

// TestGateWaitsForDesktop: a sandbox needing the desktop waits for the
// one build (started on first use, shared by every waiter), is told so,
// and then gets the full image.
func TestGateWaitsForDesktop(t *testing.T) {
	g, _, b := newGateTest(t)
	var wg sync.WaitGroup
	said := make(chan string, 8)
	results := make(chan string, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref, err := g.Image(t.Context(), "", true, func(m string) { said <- m })
			if err != nil {
				t.Error(err)
			}
			results <- ref
		}()
	}
	for range 2 {
		if m := <-said; !strings.HasPrefix(m, "waiting for the desktop image layer to finish building (started ") {
			t.Fatalf("said %q", m)
		}
	}
	close(b.release)
	wg.Wait()
	close(results)
	for ref := range results {
		if ref != "" {
			t.Errorf("Image = %q, want the sandbox image (\"\")", ref)
		}
	}
	if b.calls != 1 {
		t.Errorf("%d builds, want one shared by both waiters", b.calls)
	}
	if m := <-said; !strings.HasPrefix(m, "the desktop image layer is ready (built in ") {
		t.Errorf("said %q after the build", m)
	}
	// Built: nobody waits any more, the full image is picked.
	if got, err := g.Image(t.Context(), "", false, nil); err != nil || got != "" {
		t.Errorf("Image after the build = %q, %v", got, err)
	}
}

// TestGateBuildFails: a failed build ends the wait with its error; the
// next sandbox that needs the desktop starts another build.
func TestGateBuildFails(t *testing.T) {
	g, _, b := newGateTest(t)
	b.fail = errors.New("Step 2/3 : RUN apt-get update: boom")
	close(b.release)
	_, err := g.Image(t.Context(), "", true, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "the desktop image layer failed to build: Step 2/3 : RUN apt-get update: boom") {
		t.Fatalf("error %v", err)
	}
	g.Image(t.Context(), "", true, func(string) {})
	if b.calls != 2 {
		t.Errorf("%d builds, want a second one for the second waiter", b.calls)
	}
}

// TestGateStart: a server starting on a new installation (core current,
// full image missing) builds the layer; with the full image present,
// stale or not, or no current core, it builds nothing.
func TestGateStart(t *testing.T) {
	g, f, b := newGateTest(t)
	f.images["img:t"] = map[string]string{LabelHash: "stale"}
	if started, err := g.Start(t.Context()); started || err != nil {
		t.Fatalf("Start with a stale full image = %t, %v; want no build", started, err)
	}
	delete(f.images, "img:t")
	if started, err := g.Start(t.Context()); !started || err != nil {
		t.Fatalf("Start with the full image missing = %t, %v; want a build", started, err)
	}
	close(b.release)
	g.wg.Wait()
	if st, _ := Inspect(t.Context(), f, "img:t"); !st.Current || b.calls != 1 {
		t.Fatalf("after Start's build: %+v, %d builds", st, b.calls)
	}

	g2, f2, b2 := newGateTest(t)
	f2.images["img-core:t"] = map[string]string{LabelHash: "old core"}
	if started, _ := g2.Start(t.Context()); started || b2.calls != 0 {
		t.Errorf("Start with a stale core started a build")
	}
	if got, _ := g2.Image(t.Context(), "", false, nil); got != "" {
		t.Errorf("Image with a stale core = %q, want the sandbox image", got)
	}
}

// TestGateCloseStopsBuild: a waiting job ends when the server closes the
// Gate; its build is cancelled with the reason.
func TestGateCloseStopsBuild(t *testing.T) {
	g, _, _ := newGateTest(t)
	errc := make(chan error, 1)
	said := make(chan struct{})
	go func() {
		_, err := g.Image(t.Context(), "", true, func(string) { close(said) })
		errc <- err
	}()
	<-said
	g.Close()
	if err := <-errc; !errors.Is(err, errGateClosed) {
		t.Fatalf("error %v, want the shutdown", err)
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[int64]string{0: "just now", 40e9: "40s ago", 150e9: "2m ago"} {
		if got := ago(time.Duration(d)); got != want {
			t.Errorf("ago(%d) = %q, want %q", d, got, want)
		}
	}
}

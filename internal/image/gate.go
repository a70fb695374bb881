package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/imagename"
)

// A new installation builds the core image first and runs sandboxes on it
// at once; the desktop and notebook layer (the full image) follows, built
// by the server in the background. The Gate picks each sandbox's image
// meanwhile: the full image when it is there, else the core for a sandbox
// that needs no desktop, and for one that does it waits for the layer,
// building it if no build runs, saying so to whoever waits. Once the full
// image is on the engine, stale or not, the Gate always picks it: an
// installation that has it behaves exactly as before the split.

// GateConfig configures a Gate.
type GateConfig struct {
	Engine Engine
	// Ref is the sandbox image (the full one); its core is CoreRef(Ref).
	Ref string
	// LogPath is the file a build's output goes to; empty: discarded.
	LogPath string
	// Build builds the full image on top of the current core, writing its
	// output to w. Default: Build with LayerDesktop.
	Build func(ctx context.Context, w io.Writer) error
	Log   *slog.Logger
}

// Gate picks the image of each sandbox while the desktop layer may be
// missing, and builds that layer in the background. Close stops a build.
type Gate struct {
	cfg  GateConfig
	life context.Context
	stop context.CancelCauseFunc
	wg   sync.WaitGroup

	mu  sync.Mutex
	run *gateBuild // the build in progress or the last one
}

// gateBuild is one build of the desktop layer.
type gateBuild struct {
	started time.Time
	done    chan struct{}
	err     error // set before done is closed
}

// errGateClosed stops a build when the server shuts down.
var errGateClosed = errors.New("the server is shutting down")

// NewGate returns a Gate for cfg.Ref.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Build == nil {
		cfg.Build = func(ctx context.Context, w io.Writer) error {
			_, err := Build(ctx, cfg.Engine, Options{Ref: cfg.Ref, Layer: LayerDesktop, Progress: w})
			return err
		}
	}
	g := &Gate{cfg: cfg}
	g.life, g.stop = context.WithCancelCause(context.Background())
	return g
}

// Close stops a build in progress and waits for it.
func (g *Gate) Close() {
	g.stop(errGateClosed)
	g.wg.Wait()
}

// Start begins building the desktop layer in the background if the full
// image is missing and the core is current: what a server does when it
// starts on a new installation. It reports whether a build started.
func (g *Gate) Start(ctx context.Context) (bool, error) {
	ls, err := InspectLayers(ctx, g.cfg.Engine, g.cfg.Ref)
	if err != nil || ls.Full.Present || !ls.Core.Current {
		return false, err
	}
	g.ensureBuild()
	return true, nil
}

// Image returns the image for a sandbox that asks for ref ("" for the
// sandbox image): ref itself, unless it is the sandbox image and the full
// image is missing while the core is current. Then a sandbox that needs
// no desktop gets the core, and one that does waits for the desktop layer,
// building it if no build runs; say tells the waiting job why, once.
func (g *Gate) Image(ctx context.Context, ref string, desktop bool, say func(string)) (string, error) {
	if ref != "" && !sameRef(ref, g.cfg.Ref) {
		return ref, nil
	}
	for said := false; ; said = true {
		ls, err := InspectLayers(ctx, g.cfg.Engine, g.cfg.Ref)
		if err != nil || ls.Full.Present || !ls.Core.Current {
			return ref, err // no image at all is the driver's to report
		}
		if !desktop {
			return ls.CoreRef, nil
		}
		b := g.ensureBuild()
		if !said {
			say(g.waitMessage(b))
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-b.done:
		}
		if b.err != nil {
			return "", fmt.Errorf("the desktop image layer failed to build%s: %w", g.logHint(), b.err)
		}
		say(fmt.Sprintf("the desktop image layer is ready (built in %s)", time.Since(b.started).Round(time.Second)))
	}
}

// ensureBuild returns the build in progress, starting one if none runs.
func (g *Gate) ensureBuild() *gateBuild {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.run != nil {
		select {
		case <-g.run.done:
		default:
			return g.run
		}
	}
	b := &gateBuild{started: time.Now(), done: make(chan struct{})}
	g.run = b
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(b.done)
		b.err = g.build()
		if b.err != nil {
			g.cfg.Log.Error("build the desktop image layer", "image", g.cfg.Ref, "log", g.cfg.LogPath, "err", b.err)
			return
		}
		g.cfg.Log.Info("desktop image layer built", "image", g.cfg.Ref, "took", time.Since(b.started).Round(time.Second))
	}()
	return b
}

func (g *Gate) build() error {
	w := io.Discard
	if g.cfg.LogPath != "" {
		f, err := os.OpenFile(g.cfg.LogPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("build log: %w", err)
		}
		defer f.Close()
		w = f
	}
	g.cfg.Log.Info("building the desktop image layer in the background", "image", g.cfg.Ref, "log", g.cfg.LogPath)
	return g.cfg.Build(g.life, w)
}

// waitMessage says what a job waits for and since when.
func (g *Gate) waitMessage(b *gateBuild) string {
	return fmt.Sprintf("waiting for the desktop image layer to finish building (started %s)%s", ago(time.Since(b.started)), g.logHint())
}

func (g *Gate) logHint() string {
	if g.cfg.LogPath == "" {
		return ""
	}
	return "; its log: " + g.cfg.LogPath
}

// ago says how long ago, in the largest whole unit: "just now", "40s
// ago", "2m ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm ago", int(d.Minutes()))
}

// sameRef reports whether a and b name one image ("x" is "x:latest").
func sameRef(a, b string) bool {
	na, errA := imagename.Normalize(a)
	nb, errB := imagename.Normalize(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return na == nb
}

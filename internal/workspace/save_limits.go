package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/docker/go-units"

	"github.com/agentbox/agentbox/internal/artifact"
)

// What a checkpoint reads is bounded: the tree is a sandbox's, and a
// sparse file costs the sandbox no disk quota (`truncate -s 1T big`) while
// reading it costs all its zeros, hashed and put in the blob store.

// SaveLimits bound what one checkpoint reads of its tree.
type SaveLimits struct {
	// MaxNewBytes bounds the bytes a checkpoint reads and hashes: those of
	// the files that changed since the snapshot it was given (all of them
	// without one). A checkpoint that would read more fails (ErrTooLarge)
	// and the latest checkpoint stays what it was. 0 or less:
	// DefaultMaxNewBytes.
	MaxNewBytes int64
	// MaxHoleBytes bounds the holes of one file: a sparse file with more
	// is skipped (SaveStats.Skipped says so), as a FIFO is. 0 or less:
	// DefaultMaxHoleBytes.
	MaxHoleBytes int64
}

// The defaults of SaveLimits.
const (
	DefaultMaxNewBytes  = 16 << 30
	DefaultMaxHoleBytes = 64 << 20
)

func (l SaveLimits) maxNewBytes() int64  { return orDefault(l.MaxNewBytes, DefaultMaxNewBytes) }
func (l SaveLimits) maxHoleBytes() int64 { return orDefault(l.MaxHoleBytes, DefaultMaxHoleBytes) }

// SaveWithin is Save reading no more of src than lim allows.
func (s *Shared) SaveWithin(ctx context.Context, id, tree string, src *os.Root, prev *Snapshot, c Checkpoint, lim SaveLimits) (*Snapshot, SaveStats, error) {
	return s.Save(withSaveLimits(ctx, lim), id, tree, src, prev, c)
}

// saveLimitsKey is the context key of the SaveLimits of a Save.
type saveLimitsKey struct{}

func withSaveLimits(ctx context.Context, lim SaveLimits) context.Context {
	return context.WithValue(ctx, saveLimitsKey{}, lim)
}

// saveBudget is what is left of a checkpoint's SaveLimits.
type saveBudget struct {
	lim  SaveLimits
	read int64 // bytes of files read and hashed
}

func newSaveBudget(ctx context.Context) saveBudget {
	lim, _ := ctx.Value(saveLimitsKey{}).(SaveLimits)
	return saveBudget{lim: lim}
}

// errSkip says why a file is not checkpointed.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

// admit checks the open file f of size bytes before it is read: a sparse
// file of too many holes is an errSkip, a file that would take the
// checkpoint over its bytes an ErrTooLarge. It leaves f's offset moved.
func (b *saveBudget) admit(f *os.File, size int64) error {
	if holes := artifact.HoleBytes(f, size, b.lim.maxHoleBytes()); holes > b.lim.maxHoleBytes() {
		return errSkip{fmt.Sprintf("a sparse file of %s, of more than %s of holes, which is not checkpointed",
			units.BytesSize(float64(size)), units.BytesSize(float64(b.lim.maxHoleBytes())))}
	}
	if b.read+size > b.lim.maxNewBytes() {
		return b.over()
	}
	return nil
}

// over is the error of a checkpoint that would read more than its bytes.
func (b *saveBudget) over() error {
	return fmt.Errorf("%w: more than the %s of changed files one checkpoint reads",
		ErrTooLarge, units.BytesSize(float64(b.lim.maxNewBytes())))
}

// reader reads f, counting what it reads against the budget, and fails
// with ErrTooLarge past it: a file may grow, or have holes punched in it,
// after admit. It hides f's WriterTo, so io.CopyBuffer uses its buffer.
func (b *saveBudget) reader(f *os.File) io.Reader { return &budgetReader{f: f, b: b} }

type budgetReader struct {
	f *os.File
	b *saveBudget
}

func (r *budgetReader) Read(p []byte) (int, error) {
	left := r.b.lim.maxNewBytes() - r.b.read
	if int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := r.f.Read(p)
	if r.b.read += int64(n); r.b.read > r.b.lim.maxNewBytes() {
		return n, r.b.over()
	}
	return n, err
}

// skipped records the file p as skipped if err says why, and returns
// err otherwise.
func (s *saver) skipped(p string, err error) error {
	var sk errSkip
	if errors.As(err, &sk) {
		s.skip(p, sk.why)
		return nil
	}
	return err
}

// unnamable reports whether the entry p cannot be named in a manifest,
// and records it as skipped then: JSON holds only UTF-8, and a name that
// is not would come back another (every bad byte U+FFFD), two such names
// one, and the checkpoint would not restore at all.
func (s *saver) unnamable(p string) bool {
	if utf8.ValidString(p) {
		return false
	}
	s.skip(strings.ToValidUTF8(p, "\uFFFD"), "a name that is not UTF-8, which is not checkpointed")
	return true
}

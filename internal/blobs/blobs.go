// Package blobs is the contract of the blob store a cluster shares: the
// checkpoints of the jobs' workspaces, and their final artifacts, kept
// where every host can read them (AGENTBOX_BLOBS: a directory every host
// mounts, or the PostgreSQL database of the job store). Implementations
// live in subpackages (dirblobs, pgblobs) and pass blobstest.
//
// A store holds namespaces, one per job (named by the job's ID). A
// namespace holds content-addressed blobs, each named by the lowercase
// hex SHA-256 of its bytes, and a few small named refs (which checkpoint
// is a job's latest). Blobs are written by the host from trees a sandbox
// wrote: their bytes are untrusted data, never names of the store's own.
package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

var (
	// ErrNotFound means the namespace holds no blob (or ref) of that name.
	ErrNotFound = errors.New("no such blob")
	// ErrCorrupt means the bytes given to Put do not have the digest or
	// the size they were put under: nothing was stored.
	ErrCorrupt = errors.New("blob does not match its digest")
)

// MaxRef is the most bytes a ref's value holds.
const MaxRef = 64 << 10

// Store keeps blobs and refs in namespaces. Every method checks its
// names (CheckNS, CheckDigest, CheckRef) before it touches anything.
type Store interface {
	// Has reports whether namespace ns holds the blob digest.
	Has(ctx context.Context, ns, digest string) (bool, error)
	// Put stores the size bytes r gives as the blob digest of ns. It
	// reads r up to one byte past size; bytes of another length or
	// another SHA-256 are refused with ErrCorrupt, storing nothing. A
	// blob is seen whole or not at all; putting one already held is no
	// error (and may skip reading r).
	Put(ctx context.Context, ns, digest string, size int64, r io.Reader) error
	// Open opens the blob digest of ns for reading, with its size;
	// ErrNotFound if there is none. The caller closes it.
	Open(ctx context.Context, ns, digest string) (io.ReadCloser, int64, error)
	// SetRef sets the ref name of ns to value (at most MaxRef bytes),
	// replacing it whole.
	SetRef(ctx context.Context, ns, name string, value []byte) error
	// Ref returns the value of ref name of ns; ErrNotFound if unset.
	Ref(ctx context.Context, ns, name string) ([]byte, error)
	// Remove removes namespace ns with all its blobs and refs; removing
	// an absent one is no error.
	Remove(ctx context.Context, ns string) error
	// List returns the namespaces the store holds, in no particular
	// order.
	List(ctx context.Context) ([]string, error)
}

// Digest returns the name of a blob of bytes b: its SHA-256, lowercase
// hex.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CheckNS refuses a namespace name that is not one short path element of
// letters, digits, '-', '_' and '.', not starting with '.'.
func CheckNS(ns string) error {
	if !plainName(ns, 128) {
		return fmt.Errorf("blobs: bad namespace %q", ns)
	}
	return nil
}

// CheckRef refuses a ref name as CheckNS does a namespace.
func CheckRef(name string) error {
	if !plainName(name, 64) {
		return fmt.Errorf("blobs: bad ref name %q", name)
	}
	return nil
}

// CheckDigest refuses a digest that is not 64 lowercase hex digits.
func CheckDigest(d string) error {
	if len(d) != 2*sha256.Size {
		return fmt.Errorf("blobs: bad digest %q", d)
	}
	for _, c := range d {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("blobs: bad digest %q", d)
		}
	}
	return nil
}

func plainName(s string, max int) bool {
	if s == "" || len(s) > max || s[0] == '.' {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Verifier reads a blob's bytes through to a writer while checking them
// against the digest and size they were put under: what an
// implementation's Put wraps r in.
type Verifier struct {
	r      io.Reader
	h      hashWriter
	digest string
	size   int64
	n      int64
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

// NewVerifier reads r, which must give exactly size bytes of SHA-256
// digest; it reads at most one byte more, to tell a longer r.
func NewVerifier(r io.Reader, digest string, size int64) *Verifier {
	return &Verifier{r: io.LimitReader(r, size+1), h: sha256.New(), digest: digest, size: size}
}

// Read reads from the underlying reader, hashing what it gives.
func (v *Verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n > v.size {
		return n, fmt.Errorf("%w: more than its %d bytes", ErrCorrupt, v.size)
	}
	return n, err
}

// Check says whether everything read so far is the blob: its size and
// digest (ErrCorrupt otherwise). Call it once the reader gave io.EOF.
func (v *Verifier) Check() error {
	if v.n != v.size {
		return fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, v.n, v.size)
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.digest {
		return fmt.Errorf("%w: sha256 %s, want %s", ErrCorrupt, got, v.digest)
	}
	return nil
}

// Blob is a small blob held whole in memory, for a Batcher.
type Blob struct {
	Digest string
	Data   []byte
}

// MaxBatchBlob is the largest blob a Batcher is given, and MaxBatch the
// most bytes of one batch.
const (
	MaxBatchBlob = 64 << 10
	MaxBatch     = 8 << 20
)

// Batcher is an optional ability of a Store: putting many small blobs in
// one round trip, where Put costs one each (a database). A checkpoint of
// thousands of small files uses it when the store has it.
type Batcher interface {
	// PutBatch stores each blob of bs (each at most MaxBatchBlob bytes, all
	// at most MaxBatch) in namespace ns as Put would, checking each digest
	// first (ErrCorrupt, storing nothing), and returns how many of them,
	// and how many bytes, the namespace did not hold yet.
	PutBatch(ctx context.Context, ns string, bs []Blob) (added int, bytes int64, err error)
}

// CheckBatch checks a batch for PutBatch: its namespace, its sizes, and
// that every blob has its digest.
func CheckBatch(ns string, bs []Blob) error {
	if err := CheckNS(ns); err != nil {
		return err
	}
	total := 0
	for _, b := range bs {
		if err := CheckDigest(b.Digest); err != nil {
			return err
		}
		if len(b.Data) > MaxBatchBlob {
			return fmt.Errorf("blobs: a batched blob of %d bytes, over %d", len(b.Data), MaxBatchBlob)
		}
		if total += len(b.Data); total > MaxBatch {
			return fmt.Errorf("blobs: a batch of more than %d bytes", MaxBatch)
		}
		if Digest(b.Data) != b.Digest {
			return fmt.Errorf("%w: a batched blob is not %s", ErrCorrupt, b.Digest)
		}
	}
	return nil
}

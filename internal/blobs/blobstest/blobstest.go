// Package blobstest is the conformance suite of blobs.Store: every
// implementation (dirblobs, pgblobs) runs Run from its own tests and so
// keeps the rules of the blobs package's contract.
package blobstest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/agentbox/agentbox/internal/blobs"
)

// NewStore returns a new, empty store; the implementation's test cleans
// it up when t ends.
type NewStore func(t *testing.T) blobs.Store

// Run runs the suite, each test in its own t.Run with a fresh store.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(*testing.T, blobs.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"ReadsOneBytePast", testReadsOneBytePast},
		{"Corrupt", testCorrupt},
		{"PutTwice", testPutTwice},
		{"Namespaces", testNamespaces},
		{"Refs", testRefs},
		{"RefTooLarge", testRefTooLarge},
		{"BadNames", testBadNames},
		{"Remove", testRemove},
		{"List", testList},
		{"PutConcurrent", testPutConcurrent},
		{"PutCanceled", testPutCanceled},
		{"NotFound", testNotFound},
		{"Batch", testBatch},
		{"BatchConcurrent", testBatchConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// bigSize is larger than any implementation's chunk or buffer (pgblobs
// writes 1 MiB rows), and not a multiple of one.
const bigSize = 3<<20 + 17

// data returns n pseudo-random bytes, the same for the same seed.
func data(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// put puts b as its digest in ns, failing t on an error.
func put(t *testing.T, s blobs.Store, ns string, b []byte) string {
	t.Helper()
	d := blobs.Digest(b)
	if err := s.Put(t.Context(), ns, d, int64(len(b)), bytes.NewReader(b)); err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", ns, len(b), err)
	}
	return d
}

// has reports whether ns holds d, failing t on an error.
func has(t *testing.T, s blobs.Store, ns, d string) bool {
	t.Helper()
	ok, err := s.Has(t.Context(), ns, d)
	if err != nil {
		t.Fatalf("Has(%s, %s): %v", ns, d, err)
	}
	return ok
}

// read opens and reads the blob d of ns whole, checking its size.
func read(t *testing.T, s blobs.Store, ns, d string) []byte {
	t.Helper()
	rc, size, err := s.Open(t.Context(), ns, d)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", ns, d, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", d, err)
	}
	if int64(len(b)) != size {
		t.Fatalf("Open(%s) said %d bytes, read %d", d, size, len(b))
	}
	return b
}

// list returns the store's namespaces, sorted.
func list(t *testing.T, s blobs.Store) []string {
	t.Helper()
	ns, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	slices.Sort(ns)
	return ns
}

func testRoundTrip(t *testing.T, s blobs.Store) {
	for _, b := range [][]byte{{}, []byte("hello\n"), data(1, bigSize)} {
		d := blobs.Digest(b)
		if has(t, s, "ns1", d) {
			t.Fatalf("Has(%d bytes) before Put", len(b))
		}
		// Readers give what they like: a half at a time here.
		err := s.Put(t.Context(), "ns1", d, int64(len(b)), iotest.HalfReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("Put(%d bytes): %v", len(b), err)
		}
		if !has(t, s, "ns1", d) {
			t.Fatalf("Has(%d bytes) false after Put", len(b))
		}
		if got := read(t, s, "ns1", d); !bytes.Equal(got, b) {
			t.Fatalf("Open(%d bytes) read %d other bytes", len(b), len(got))
		}
	}
}

// testReadsOneBytePast: Put reads r at most one byte past the size.
func testReadsOneBytePast(t *testing.T, s blobs.Store) {
	b := data(2, 1000)
	r := bytes.NewReader(append(slices.Clone(b), make([]byte, 100)...))
	err := s.Put(t.Context(), "ns1", blobs.Digest(b), int64(len(b)), r)
	if !errors.Is(err, blobs.ErrCorrupt) {
		t.Errorf("Put of a longer reader: %v, want ErrCorrupt", err)
	}
	if read := 1100 - r.Len(); read > len(b)+1 {
		t.Errorf("Put read %d bytes of a %d-byte blob, want at most one more", read, len(b))
	}
}

// testCorrupt: bytes of another digest or length are refused, nothing is
// stored, and the right bytes may be put after.
func testCorrupt(t *testing.T, s blobs.Store) {
	b := data(3, bigSize)
	d := blobs.Digest(b)
	cases := []struct {
		name   string
		digest string
		size   int64
		body   []byte
	}{
		{"wrong digest", d, int64(len(b)), data(4, len(b))},
		{"too short", d, int64(len(b)), b[:len(b)-1]},
		{"too long", blobs.Digest(b[:len(b)-1]), int64(len(b) - 1), b},
		{"empty, too long", blobs.Digest(nil), 0, []byte("x")},
		{"empty, wrong size", blobs.Digest(nil), 1, nil},
	}
	for _, c := range cases {
		err := s.Put(t.Context(), "ns1", c.digest, c.size, bytes.NewReader(c.body))
		if !errors.Is(err, blobs.ErrCorrupt) {
			t.Errorf("Put, %s: %v, want ErrCorrupt", c.name, err)
		}
		if has(t, s, "ns1", c.digest) {
			t.Errorf("Put, %s: the blob was stored", c.name)
		}
	}
	if ns := list(t, s); len(ns) != 0 {
		t.Errorf("List after failed Puts = %q, want none", ns)
	}
	put(t, s, "ns1", b)
	if got := read(t, s, "ns1", d); !bytes.Equal(got, b) {
		t.Errorf("after failed Puts, the blob put right reads %d other bytes", len(got))
	}
}

// testPutTwice: putting a blob held is no error and changes nothing.
func testPutTwice(t *testing.T, s blobs.Store) {
	b := data(5, 5000)
	d := put(t, s, "ns1", b)
	put(t, s, "ns1", b)
	if got := read(t, s, "ns1", d); !bytes.Equal(got, b) {
		t.Errorf("after two Puts, read %d other bytes", len(got))
	}
}

// testNamespaces: a blob or a ref of one namespace is not another's.
func testNamespaces(t *testing.T, s blobs.Store) {
	d := put(t, s, "job-a", []byte("a"))
	if has(t, s, "job-b", d) {
		t.Error("Has in job-b of a blob of job-a")
	}
	if _, _, err := s.Open(t.Context(), "job-b", d); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open in job-b of a blob of job-a: %v, want ErrNotFound", err)
	}
	if err := s.SetRef(t.Context(), "job-a", "latest", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ref(t.Context(), "job-b", "latest"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Ref in job-b of a ref of job-a: %v, want ErrNotFound", err)
	}
}

func testRefs(t *testing.T, s blobs.Store) {
	ctx := t.Context()
	if _, err := s.Ref(ctx, "ns1", "workspace"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Ref unset: %v, want ErrNotFound", err)
	}
	long := bytes.Repeat([]byte("x"), blobs.MaxRef)
	for _, v := range [][]byte{[]byte(`{"step":1}`), long, []byte(`{"s":2}`), {}} {
		if err := s.SetRef(ctx, "ns1", "workspace", v); err != nil {
			t.Fatalf("SetRef(%d bytes): %v", len(v), err)
		}
		got, err := s.Ref(ctx, "ns1", "workspace")
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Ref after SetRef(%d bytes) = %d bytes, %v; want it whole", len(v), len(got), err)
		}
	}
	if err := s.SetRef(ctx, "ns1", "git", []byte("g")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Ref(ctx, "ns1", "workspace"); err != nil || len(got) != 0 {
		t.Errorf("Ref workspace after setting git = %q, %v; want it unchanged", got, err)
	}
}

// testRefTooLarge: a value over MaxRef is refused, the old one kept.
func testRefTooLarge(t *testing.T, s blobs.Store) {
	ctx := t.Context()
	if err := s.SetRef(ctx, "ns1", "r", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRef(ctx, "ns1", "r", make([]byte, blobs.MaxRef+1)); err == nil {
		t.Error("SetRef over MaxRef: no error")
	}
	if got, err := s.Ref(ctx, "ns1", "r"); err != nil || string(got) != "old" {
		t.Errorf("Ref after a refused SetRef = %q, %v; want old", got, err)
	}
}

func testNotFound(t *testing.T, s blobs.Store) {
	d := blobs.Digest([]byte("missing"))
	rc, _, err := s.Open(t.Context(), "ns1", d)
	if !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open of a missing blob: %v, want ErrNotFound", err)
	}
	if rc != nil {
		rc.Close()
	}
	put(t, s, "ns1", []byte("there"))
	if _, _, err := s.Open(t.Context(), "ns1", d); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open of a missing blob of a namespace that holds one: %v, want ErrNotFound", err)
	}
	if has(t, s, "ns1", d) {
		t.Error("Has of a missing blob")
	}
}

// noRead is a reader that fails the test when read.
type noRead struct{ t *testing.T }

func (r noRead) Read([]byte) (int, error) {
	r.t.Error("Put read the body of a blob it should have refused by its names")
	return 0, io.EOF
}

// ctxReader cancels its context once it gave after bytes, then goes on
// giving the rest: the store must see the cancellation, not an error of r.
type ctxReader struct {
	r      io.Reader
	after  int
	n      int
	cancel context.CancelFunc
}

func (c *ctxReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n += n; c.n >= c.after {
		c.cancel()
	}
	return n, err
}

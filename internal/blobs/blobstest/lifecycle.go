package blobstest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
)

// testBadNames: every method refuses names the blobs package's rules
// refuse, before it reads a body or stores anything.
func testBadNames(t *testing.T, s blobs.Store) {
	ctx := t.Context()
	good := blobs.Digest([]byte("x"))
	badNS := []string{"", "../x", ".hidden", "a/b", "..", "x\x00y", strings.Repeat("a", 129)}
	badDigest := []string{"", "abc", good[:63], good + "0", "ABCDEF" + good[6:], "../" + good[3:]}
	badRef := []string{"", "a/b", ".hidden", "..", "../x"}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
		}
	}
	for _, ns := range badNS {
		_, err := s.Has(ctx, ns, good)
		refused("Has(ns "+ns+")", err)
		refused("Put(ns "+ns+")", s.Put(ctx, ns, good, 1, noRead{t}))
		_, _, err = s.Open(ctx, ns, good)
		refused("Open(ns "+ns+")", err)
		refused("SetRef(ns "+ns+")", s.SetRef(ctx, ns, "r", []byte("v")))
		_, err = s.Ref(ctx, ns, "r")
		refused("Ref(ns "+ns+")", err)
		refused("Remove(ns "+ns+")", s.Remove(ctx, ns))
	}
	for _, d := range badDigest {
		_, err := s.Has(ctx, "ns1", d)
		refused("Has(digest "+d+")", err)
		refused("Put(digest "+d+")", s.Put(ctx, "ns1", d, 1, noRead{t}))
		_, _, err = s.Open(ctx, "ns1", d)
		refused("Open(digest "+d+")", err)
	}
	for _, name := range badRef {
		refused("SetRef(ref "+name+")", s.SetRef(ctx, "ns1", name, []byte("v")))
		_, err := s.Ref(ctx, "ns1", name)
		refused("Ref(ref "+name+")", err)
	}
	if ns := list(t, s); len(ns) != 0 {
		t.Errorf("List after refused calls = %q, want none", ns)
	}
}

// testRemove: Remove takes a namespace's blobs and refs, leaves the
// others', and removing again (or what never was) is no error.
func testRemove(t *testing.T, s blobs.Store) {
	ctx := t.Context()
	d := put(t, s, "gone", data(6, bigSize))
	small := put(t, s, "gone", []byte("small"))
	kept := put(t, s, "kept", []byte("small"))
	for _, ns := range []string{"gone", "kept"} {
		if err := s.SetRef(ctx, ns, "workspace", []byte(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := s.Remove(ctx, "gone"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if err := s.Remove(ctx, "never"); err != nil {
		t.Errorf("Remove of a namespace that never was: %v", err)
	}
	if has(t, s, "gone", d) || has(t, s, "gone", small) {
		t.Error("Has of a blob of a removed namespace")
	}
	if _, _, err := s.Open(ctx, "gone", d); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open in a removed namespace: %v, want ErrNotFound", err)
	}
	if _, err := s.Ref(ctx, "gone", "workspace"); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Ref in a removed namespace: %v, want ErrNotFound", err)
	}
	if !has(t, s, "kept", kept) {
		t.Error("Remove of one namespace removed another's blob")
	}
	if v, err := s.Ref(ctx, "kept", "workspace"); err != nil || string(v) != "kept" {
		t.Errorf("Remove of one namespace: the other's ref = %q, %v", v, err)
	}
	// A removed namespace may be used again.
	put(t, s, "gone", []byte("small"))
	if has(t, s, "gone", d) || !has(t, s, "gone", small) {
		t.Error("a namespace used again after Remove holds what it held before")
	}
}

// testList: List names the namespaces holding blobs or refs, not the
// removed ones.
func testList(t *testing.T, s blobs.Store) {
	ctx := t.Context()
	if ns := list(t, s); len(ns) != 0 {
		t.Fatalf("List of a new store = %q", ns)
	}
	put(t, s, "job-1", []byte("a"))
	put(t, s, "job-1", []byte("b"))
	put(t, s, "job-2", nil)
	if err := s.SetRef(ctx, "job-3", "workspace", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRef(ctx, "job-2", "workspace", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, s), []string{"job-1", "job-2", "job-3"}; !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	for _, ns := range []string{"job-1", "job-3"} {
		if err := s.Remove(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := list(t, s), []string{"job-2"}; !slices.Equal(got, want) {
		t.Errorf("List after Remove = %q, want %q", got, want)
	}
}

// testPutConcurrent: hosts checkpointing the same file at once all
// succeed, and the blob is whole.
func testPutConcurrent(t *testing.T, s blobs.Store) {
	b := data(7, bigSize)
	d := blobs.Digest(b)
	const putters = 6
	errs := make([]error, putters)
	var wg sync.WaitGroup
	for i := range putters {
		wg.Go(func() {
			errs[i] = s.Put(t.Context(), "ns1", d, int64(len(b)), bytes.NewReader(b))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Puts of one blob: %v", err)
	}
	if got := read(t, s, "ns1", d); !bytes.Equal(got, b) {
		t.Fatalf("after concurrent Puts, read %d other bytes", len(got))
	}
}

// testPutCanceled: a Put whose context ends while it reads stores
// nothing, though the bytes it read were right.
func testPutCanceled(t *testing.T, s blobs.Store) {
	b := data(8, bigSize)
	d := blobs.Digest(b)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &ctxReader{r: bytes.NewReader(b), after: len(b) / 2, cancel: cancel}
	if err := s.Put(ctx, "ns1", d, int64(len(b)), r); err == nil {
		t.Fatal("Put canceled while reading: no error")
	}
	if has(t, s, "ns1", d) {
		t.Fatal("Put canceled while reading stored the blob")
	}
	if ns := list(t, s); len(ns) != 0 {
		t.Errorf("List after a canceled Put = %q, want none", ns)
	}
	put(t, s, "ns1", b)
}

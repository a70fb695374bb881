package docker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The kernel reads and writes these structures by size: a field out of
// place would set the wrong limit. (The project's machines have no kernel
// quota support, so the XFS path itself cannot run here.)
func TestQuotaStructLayout(t *testing.T) {
	if n := unsafe.Sizeof(fsDiskQuota{}); n != 112 {
		t.Errorf("fs_disk_quota is %d bytes, want 112", n)
	}
	if off := unsafe.Offsetof(fsDiskQuota{}.BlkHardLimit); off != 8 {
		t.Errorf("d_blk_hardlimit at %d, want 8", off)
	}
	if off := unsafe.Offsetof(fsDiskQuota{}.BCount); off != 40 {
		t.Errorf("d_bcount at %d, want 40", off)
	}
	if n := unsafe.Sizeof(fsXattr{}); n != 28 {
		t.Errorf("fsxattr is %d bytes, want 28", n)
	}
	if off := unsafe.Offsetof(fsXattr{}.ProjID); off != 12 {
		t.Errorf("fsx_projid at %d, want 12", off)
	}
}

func TestNoXFSQuotaOnOtherFilesystems(t *testing.T) {
	if xfsQuotas(t.TempDir()) && !isXFS(t.TempDir()) {
		t.Error("project quotas reported on a filesystem that is not XFS")
	}
}

func TestCopySparseKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	src, dst := dir+"/src", dir+"/dst"
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("middle"), 32<<20)
	f.Truncate(64 << 20)
	f.Close()
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	if !bytes.Equal(a, b) {
		t.Fatal("copy differs")
	}
	var st syscall.Stat_t
	syscall.Stat(dst, &st)
	if st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("copy is %d bytes with %d allocated, want 64 MiB with its holes kept", st.Size, st.Blocks*512)
	}
}

func TestTemplatesArePruned(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		p := filepath.Join(dir, fmt.Sprintf("ext4-%d.img", i))
		os.WriteFile(p, nil, 0o600)
		at := time.Now().Add(time.Duration(i-20) * time.Minute)
		os.Chtimes(p, at, at)
	}
	pruneTemplates(dir, maxTemplates-1)
	left, _ := filepath.Glob(filepath.Join(dir, "ext4-*.img"))
	if len(left) != maxTemplates-1 {
		t.Fatalf("%d templates left, want %d", len(left), maxTemplates-1)
	}
	if _, err := os.Stat(filepath.Join(dir, "ext4-19.img")); err != nil {
		t.Error("the most recently used template was pruned")
	}
	if _, err := os.Stat(filepath.Join(dir, "ext4-0.img")); err == nil {
		t.Error("the least recently used template was kept")
	}
}

package docker

import (
	"testing"
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

package docker

import "testing"

func TestPodmanTmpfs(t *testing.T) {
	for in, want := range map[string]string{
		"rw,nosuid,nodev,size=100":                          "rw,nosuid,nodev,size=100,noexec",
		"rw,size=100,uid=200001,gid=200001,mode=0700":       "rw,size=100,mode=0700,U,noexec",
		"rw,size=100,uid=200001,gid=200001,mode=0755,exec":  "rw,size=100,mode=0755,exec,U",
		"rw,nosuid,nodev,noexec,size=100,uid=200001,gid=20": "rw,nosuid,nodev,noexec,size=100,U",
	} {
		if got := podmanTmpfs(in); got != want {
			t.Errorf("podmanTmpfs(%q) = %q, want %q", in, got, want)
		}
	}
}

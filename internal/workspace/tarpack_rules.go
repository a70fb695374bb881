package workspace

import (
	"io/fs"
	"os"

	"github.com/agentbox/agentbox/internal/tarpack"
)

// The rules the packer (tarpack) and this package's unpacker and copier
// share, so that both ends of an upload refuse the same entries.
const readFlags = tarpack.ReadFlags

var errReplaced = tarpack.ErrReplaced

func sameEntry(f *os.File, fi fs.FileInfo) error { return tarpack.SameEntry(f, fi) }

func join(dir, name string) string { return tarpack.Join(dir, name) }

func modeKind(m fs.FileMode) string { return tarpack.ModeKind(m) }

// LinkLeadsOut is tarpack.LinkLeadsOut: Unpack refuses such links.
func LinkLeadsOut(p, target string) bool { return tarpack.LinkLeadsOut(p, target) }

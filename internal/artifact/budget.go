package artifact

import (
	"fmt"
	"os"

	"github.com/docker/go-units"
	"golang.org/x/sys/unix"
)

// charge takes a file of size bytes out of the zip's budgets, or says why
// it does not fit. Holes are checked first: a sparse file may be far
// larger than the budget, and "sparse" is the better reason then.
func (z *zipper) charge(f *os.File, size int64) (why string) {
	holes := HoleBytes(f, size, z.holesLeft)
	if holes > z.holesLeft {
		return fmt.Sprintf("sparse file of %s: its holes are more than the %s left of the %s of holes one zip expands into zeros",
			units.BytesSize(float64(size)), units.BytesSize(float64(z.holesLeft)), units.BytesSize(float64(z.opts.maxHoleBytes())))
	}
	if size > z.bytesLeft {
		return fmt.Sprintf("file of %s, over the zip's budget of %s of file content (%s was left)",
			units.BytesSize(float64(size)), units.BytesSize(float64(z.opts.maxBytes())), units.BytesSize(float64(z.bytesLeft)))
	}
	z.bytesLeft -= size
	z.holesLeft -= holes
	return ""
}

// HoleBytes counts the bytes of holes in the first size bytes of f with
// SEEK_HOLE and SEEK_DATA, and stops counting once it has found more than
// limit, so a file of many small holes costs a bounded number of calls.
// A file system without holes reports the whole file as data. It moves
// f's offset. The checkpoints of workspaces use it too: a sparse file
// costs its sandbox no disk, but reading it costs all its zeros.
func HoleBytes(f *os.File, size, limit int64) int64 {
	var holes int64
	for off := int64(0); off < size && holes <= limit; {
		hole, err := f.Seek(off, unix.SEEK_HOLE)
		if err != nil || hole >= size {
			break
		}
		data, err := f.Seek(hole, unix.SEEK_DATA)
		if err != nil || data > size { // ENXIO: a hole up to the end
			data = size
		}
		if data <= hole { // the file changed under us
			break
		}
		holes += data - hole
		off = data
	}
	return holes
}

func (o Options) maxBytes() int64     { return orDefault(o.MaxBytes, DefaultMaxBytes) }
func (o Options) maxHoleBytes() int64 { return orDefault(o.MaxHoleBytes, DefaultMaxHoleBytes) }
func (o Options) maxEntries() int64   { return orDefault(o.MaxEntries, DefaultMaxEntries) }
func (o Options) maxNameBytes() int64 { return orDefault(o.MaxNameBytes, DefaultMaxNameBytes) }

// orDefault is v, or def when v is 0 or less.
func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

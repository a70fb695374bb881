package workspace

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// zipSpool is the name of the temporary file an uploaded zip is spooled
// to, a pattern of os.CreateTemp and of filepath.Glob.
const zipSpool = ".upload-*.zip"

// zipEntryCost bounds the bytes of archive one entry may add to its files'
// content (headers, name, central directory) when the archive is spooled.
const zipEntryCost = 1 << 10

// zip unpacks a zip read from r. A zip is read from its end, so r is first
// copied into a temporary file in spool (the directory beside the
// workspace), no larger than the limits allow an archive to be.
func (u *unpacker) zip(r io.Reader, spool string) error {
	f, err := os.CreateTemp(spool, zipSpool)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	max := u.lim.maxBytes() + u.lim.maxEntries()*zipEntryCost
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if err != nil {
		return fmt.Errorf("read upload: %w", err)
	}
	if n > max {
		return fmt.Errorf("%w: an archive of more than %d bytes", ErrTooLarge, max)
	}
	zr, err := zip.NewReader(f, n)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // insecure paths are refused one by one
		return badf("not a zip: %v", err)
	}
	u.in = func() int64 { return n }
	if err := u.zipSizes(zr); err != nil {
		return err
	}
	for _, zf := range zr.File {
		if err := u.zipEntry(zf); err != nil {
			return err
		}
	}
	return nil
}

// zipSizes refuses, before anything is written, a zip whose central
// directory already says it is too large.
func (u *unpacker) zipSizes(zr *zip.Reader) error {
	if int64(len(zr.File)) > u.lim.maxEntries() {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, u.lim.maxEntries())
	}
	var sum uint64
	for _, zf := range zr.File {
		if sum += zf.UncompressedSize64; sum > uint64(u.lim.maxBytes()) || sum < zf.UncompressedSize64 {
			return fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, u.lim.maxBytes())
		}
	}
	return nil
}

// zipEntry unpacks one entry of a zip.
func (u *unpacker) zipEntry(zf *zip.File) error {
	mode := zf.Mode()
	switch {
	case mode.IsDir():
		return u.dir(zf.Name, mode, zf.Modified)
	case mode&fs.ModeSymlink != 0:
		target, err := u.zipLink(zf)
		if err != nil {
			return err
		}
		return u.symlink(zf.Name, target)
	case !mode.IsRegular():
		return badf("entry %q: %s, not a file, directory or symlink", zf.Name, modeKind(mode))
	}
	rc, err := zf.Open()
	if err != nil {
		return badf("entry %q: %v", zf.Name, err)
	}
	defer rc.Close()
	return u.file(zf.Name, mode, zf.Modified, zipData{rc})
}

// zipData reads an entry's data, and says what archive/zip's ErrFormat
// means there: the data runs past the size its header declares.
type zipData struct{ r io.Reader }

func (z zipData) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	if errors.Is(err, zip.ErrFormat) {
		err = fmt.Errorf("more data than its header declares, or corrupt (%w)", err)
	}
	return n, err
}

// zipLink reads a symlink's target, the content of its entry.
func (u *unpacker) zipLink(zf *zip.File) (string, error) {
	rc, err := zf.Open()
	if err != nil {
		return "", badf("symlink %q: %v", zf.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxTargetBytes+1))
	if err != nil {
		return "", badf("symlink %q: %v", zf.Name, err)
	}
	return string(b), nil
}

// tarGz unpacks a gzip-compressed tar read from r, as it streams.
func (u *unpacker) tarGz(r io.Reader) error {
	cr := &countingReader{r: r}
	u.in = func() int64 { return cr.n }
	gz, err := gzip.NewReader(cr)
	if err != nil {
		return badf("not gzip: %v", err)
	}
	defer gz.Close()
	err = u.tarEntries(tar.NewReader(gz))
	if cr.err != nil { // the upload broke, not the archive
		return fmt.Errorf("read upload: %w", cr.err)
	}
	return err
}

// tarEntries unpacks the entries of a tar.
func (u *unpacker) tarEntries(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badf("not a tar.gz: %v", err)
		}
		if err := u.tarEntry(hdr, tr); err != nil {
			return err
		}
	}
}

// tarEntry unpacks one entry of a tar.
func (u *unpacker) tarEntry(hdr *tar.Header, r io.Reader) error {
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(hdr.Name, mode, hdr.ModTime)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.file(hdr.Name, mode, hdr.ModTime, r)
	case tar.TypeSymlink:
		return u.symlink(hdr.Name, hdr.Linkname)
	case tar.TypeLink:
		return u.hardLink(hdr.Name, hdr.Linkname)
	case tar.TypeXGlobalHeader:
		_, err := u.begin("", kindDir) // counted, nothing made
		return err
	case tar.TypeChar, tar.TypeBlock:
		return badf("entry %q: a device file", hdr.Name)
	case tar.TypeFifo:
		return badf("entry %q: a FIFO", hdr.Name)
	}
	return badf("entry %q: unsupported tar entry type %q", hdr.Name, hdr.Typeflag)
}

// countingReader counts the bytes read from r and keeps its error, which
// is the upload's (a broken connection), not the archive's.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

package microvm

import (
	"fmt"
	"io"
	"os"
)

// cpioWriter writes a newc ("070701") archive, the format the kernel
// unpacks as an initramfs. Every entry is owned by root with mtime 0 and
// numbered in order, so the same entries make the same bytes.
type cpioWriter struct {
	w   io.Writer
	off int64
	ino uint32
}

// entry writes one header, its name and size bytes of data from r.
func (c *cpioWriter) entry(name string, mode uint32, size int64, r io.Reader) error {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	if err := c.write([]byte(hdr + name + "\x00")); err != nil {
		return err
	}
	if r != nil {
		n, err := io.CopyN(c.w, r, size)
		c.off += n
		if err != nil {
			return fmt.Errorf("cpio %s: %w", name, err)
		}
	}
	return c.pad()
}

func (c *cpioWriter) write(p []byte) error {
	n, err := c.w.Write(p)
	c.off += int64(n)
	if err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	return c.pad()
}

// pad aligns the archive to 4 bytes.
func (c *cpioWriter) pad() error {
	if r := c.off % 4; r != 0 {
		n, err := c.w.Write(make([]byte, 4-r))
		c.off += int64(n)
		if err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
	}
	return nil
}

// dir adds a directory.
func (c *cpioWriter) dir(name string) error { return c.entry(name, 0o040755, 0, nil) }

// bytes adds a file holding b.
func (c *cpioWriter) bytes(name string, mode uint32, b []byte) error {
	return c.entry(name, 0o100000|mode, int64(len(b)), bytesReader(b))
}

// file adds a file with the content of the host file src.
func (c *cpioWriter) file(name string, mode uint32, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	return c.entry(name, 0o100000|mode, st.Size(), f)
}

// close writes the trailer.
func (c *cpioWriter) close() error { return c.entry("TRAILER!!!", 0, 0, nil) }

// Package artifact packages a job's workspace for download. Every file is
// read through an os.Root over the workspace, so nothing outside it can be
// reached; symlinks are stored as links (their target text), never followed;
// devices, sockets and FIFOs are left out, and nothing blocks on a FIFO.
package artifact

import (
	"archive/zip"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openFlags opens workspace files without blocking on a FIFO the agent may
// have left behind.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// WriteZip writes the tree under root to w as a zip. Entries that cannot be
// read are reported to skip (may be nil) and left out; an error means the
// zip is incomplete and must not be taken for whole.
func WriteZip(w io.Writer, root *os.Root, skip func(name string, err error)) error {
	zw := zip.NewWriter(w)
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if skip != nil {
				skip(name, err)
			}
			return nil
		}
		return addToZip(zw, root, name, d)
	})
	if err != nil {
		return err
	}
	return zw.Close()
}

// WriteZipFile zips the directory dir into the file path, atomically.
func WriteZipFile(path, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = WriteZip(f, root, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// addToZip adds one walked entry: a directory, a symlink or a regular file.
func addToZip(zw *zip.Writer, root *os.Root, name string, d fs.DirEntry) error {
	if name == "." {
		return nil
	}
	switch t := d.Type(); {
	case t.IsDir():
		_, err := zw.CreateHeader(&zip.FileHeader{Name: name + "/", Method: zip.Store})
		return err
	case t&fs.ModeSymlink != 0:
		return addSymlink(zw, root, name)
	case t.IsRegular():
		return addFile(zw, root, name)
	}
	return nil
}

func addSymlink(zw *zip.Writer, root *os.Root, name string) error {
	target, err := root.Readlink(name)
	if err != nil {
		return nil // gone since the walk listed it
	}
	fh := &zip.FileHeader{Name: name, Method: zip.Store}
	fh.SetMode(fs.ModeSymlink | 0o777)
	zf, err := zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	_, err = io.WriteString(zf, target)
	return err
}

func addFile(zw *zip.Writer, root *os.Root, name string) error {
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil // gone or replaced since the walk listed it
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	fh, err := zip.FileInfoHeader(info)
	if err != nil {
		return err
	}
	fh.Name, fh.Method = name, zip.Deflate
	zf, err := zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	_, err = io.Copy(zf, f)
	return err
}

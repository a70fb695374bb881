// Package sandboximage owns the definition of the agentbox sandbox image: the
// Dockerfile and the files it copies, embedded so that the agentbox binary
// can build the image without a source checkout, and a content hash that
// tells whether an existing image was built from this definition.
package sandboximage

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"sync"
)

// FS holds the build context of the sandbox image: the Dockerfile and every
// file it copies, at the root. Embedding drops file modes, so a builder
// should make files that start with "#!" executable.
//
//go:embed Dockerfile dpkg-excludes jupyter-server
var FS embed.FS

// Hash returns the hex SHA-256 of the embedded definition. An image labelled
// with this value was built from exactly these files.
func Hash() string {
	hashOnce.Do(func() {
		h, err := HashFS(FS)
		if err != nil {
			panic(fmt.Sprintf("sandboximage: hash embedded files: %v", err))
		}
		hash = h
	})
	return hash
}

var (
	hashOnce sync.Once
	hash     string
)

// Files returns the names of the regular files in fsys, sorted.
func Files(fsys fs.FS) ([]string, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk image definition: %w", err)
	}
	sort.Strings(names)
	return names, nil
}

// HashFS returns the hex SHA-256 over the sorted names and contents of the
// regular files in fsys. Each name and content is length-prefixed, so moving
// bytes between a name and a content changes the hash.
func HashFS(fsys fs.FS) (string, error) {
	names, err := Files(fsys)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		fmt.Fprintf(h, "%d:%s\n%d:", len(name), name, len(data))
		h.Write(data)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

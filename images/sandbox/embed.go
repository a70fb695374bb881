// Package sandboximage owns the definition of the agentbox sandbox image: the
// Dockerfiles and the files they copy, embedded so that the agentbox binary
// can build the image without a source checkout, and content hashes that
// tell whether an existing image was built from this definition.
//
// The image has two layers, each an image of its own: the core
// (Dockerfile.core: Debian, Python, Node.js, git, build tools), which is
// what a coding job needs, and the full image (Dockerfile: the desktop and
// notebook stack on top of the core), which the computer and python tools
// need. Building the core first lets a new installation run sandboxes
// minutes before the desktop layer is ready.
package sandboximage

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"sync"
)

// FS holds the build context of the sandbox image: both Dockerfiles and
// every file they copy, at the root. Embedding drops file modes, so a
// builder should make files that start with "#!" executable.
//
//go:embed Dockerfile Dockerfile.core dpkg-excludes jupyter-server
var FS embed.FS

// CoreDockerfile is the core layer's Dockerfile; "Dockerfile" is the full
// image's, which starts FROM the core (its BASE).
const CoreDockerfile = "Dockerfile.core"

// CoreFiles are the files of FS the core layer is built from: its build
// context, and what CoreHash covers.
var CoreFiles = []string{CoreDockerfile, "dpkg-excludes"}

// Hash returns the hex SHA-256 of the whole embedded definition. A full
// image labelled with this value was built from exactly these files.
func Hash() string {
	hashOnce.Do(func() { hash = hashOf(nil) })
	return hash
}

// CoreHash returns the hex SHA-256 of CoreFiles. A core image labelled
// with this value was built from exactly these files.
func CoreHash() string {
	coreHashOnce.Do(func() { coreHash = hashOf(CoreFiles) })
	return coreHash
}

var (
	hashOnce, coreHashOnce sync.Once
	hash, coreHash         string
)

func hashOf(names []string) string {
	var err error
	if names == nil {
		names, err = Files(FS)
	}
	if err == nil {
		var h string
		if h, err = HashFiles(FS, names); err == nil {
			return h
		}
	}
	panic(fmt.Sprintf("sandboximage: hash embedded files: %v", err))
}

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
	return HashFiles(fsys, names)
}

// HashFiles is HashFS over the named files of fsys only, sorted.
func HashFiles(fsys fs.FS, names []string) (string, error) {
	names = slices.Sorted(slices.Values(names))
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

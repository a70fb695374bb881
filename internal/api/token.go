package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the generated token's file in the data directory.
const TokenFile = "token"

// ViewerKeyFile is the name of the generated viewer signing key's file in
// the data directory.
const ViewerKeyFile = "viewer.key"

// LoadOrCreateToken returns the API token kept in <dataDir>/token, creating
// it (32 random bytes, hex; file mode 0600, directory 0700) if it does not
// exist. created reports whether this call wrote it. Two processes racing to
// create it end up with the same token: the file appears whole, once.
func LoadOrCreateToken(dataDir string) (token, path string, created bool, err error) {
	path = filepath.Join(dataDir, TokenFile)
	token, created, err = LoadOrCreateSecret(path)
	if err != nil {
		return "", path, false, fmt.Errorf("token: %w", err)
	}
	return token, path, created, nil
}

// LoadOrCreateSecret returns the secret kept in the file at path, creating it
// (32 random bytes, hex; mode 0600, its directory 0700) if it does not exist,
// as LoadOrCreateToken does. A file others can read is refused.
func LoadOrCreateSecret(path string) (secret string, created bool, err error) {
	secret, err = readToken(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return secret, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, err
	}
	secret = hex.EncodeToString(b[:])
	switch err := writeNew(path, secret+"\n"); {
	case errors.Is(err, os.ErrExist):
		secret, err = readToken(path)
		return secret, false, err
	case err != nil:
		return "", false, err
	}
	return secret, true, nil
}

func readToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %v); fix it with: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s is empty; delete it to have a new one generated", path)
	}
	return t, nil
}

// writeNew writes content to a temporary file and links it into place, so
// the file never exists half-written and an existing one is never replaced.
func writeNew(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

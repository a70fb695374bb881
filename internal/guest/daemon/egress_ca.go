package daemon

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox/agentbox/internal/guest"
)

// defaultSystemCABundle is the image's own trust bundle (Debian's and
// Ubuntu's place), which the egress bundle starts with.
const defaultSystemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// maxSystemCABytes caps the image's bundle: Debian's is about 220 KB.
const maxSystemCABytes = 4 << 20

// egressCA serves PUT /egress/ca: the body is the egress proxy's CA (PEM
// certificates); the guest writes the image's roots followed by it to
// cfg.EgressCABundle, atomically, and answers the path.
func (s *Server) egressCA(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, guest.MaxEgressCABytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		s.writeError(w, guest.Errorf(guest.CodeTooLarge, "egress CA over %d bytes", guest.MaxEgressCABytes))
		return
	}
	if err != nil {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "egress CA: %v", err))
		return
	}
	if err := checkCertificates(body); err != nil {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "egress CA: %v", err))
		return
	}
	system, err := readSystemCA(s.cfg.SystemCABundle)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(system) > 0 && !bytes.HasSuffix(system, []byte("\n")) {
		system = append(system, '\n')
	}
	if err := writeAtomic(s.cfg.EgressCABundle, append(system, body...)); err != nil {
		s.writeError(w, fmt.Errorf("egress CA: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, guest.EgressCA{Path: s.cfg.EgressCABundle})
}

// checkCertificates accepts PEM holding one or more certificates and
// nothing else.
func checkCertificates(data []byte) error {
	n := 0
	for rest := data; ; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return errors.New("not PEM, or text after the last certificate")
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("a %q block, not a CERTIFICATE", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return err
		}
	}
	if n == 0 {
		return errors.New("no certificate")
	}
	return nil
}

// readSystemCA reads the image's bundle at path, empty if there is none.
// The file is opened without blocking and must be a regular file.
func readSystemCA(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("system CA bundle: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, guest.Errorf(guest.CodeBadRequest, "system CA bundle %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSystemCABytes+1))
	if err != nil {
		return nil, fmt.Errorf("system CA bundle: %w", err)
	}
	if len(data) > maxSystemCABytes {
		return nil, guest.Errorf(guest.CodeTooLarge, "system CA bundle %s over %d bytes", path, maxSystemCABytes)
	}
	return data, nil
}

// writeAtomic replaces path with data (mode 0644), creating its directory:
// a reader sees the old file or the new one, never a part.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".egress-ca-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

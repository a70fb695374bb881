package artifact_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
)

// BenchmarkZip5000 zips a workspace of 5,000 small files in 50 directories,
// the shape of a mid-sized source tree.
func BenchmarkZip5000(b *testing.B) {
	ws := b.TempDir()
	body := make([]byte, 2048)
	for i := range body {
		body[i] = byte('a' + i*7%26)
	}
	for i := range 5000 {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%02d", i%50))
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%04d.go", i)), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := artifact.WriteZip(io.Discard, root, nil); err != nil {
			b.Fatal(err)
		}
	}
}

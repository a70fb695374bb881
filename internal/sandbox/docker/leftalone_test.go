package docker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLeftAloneLogsOnce: another installation's sandbox (this instance
// label, another state dir) is a debug note at each listing; a container
// whose labels were copied or forged is a warning, once per process.
func TestLeftAloneLogsOnce(t *testing.T) {
	var buf bytes.Buffer
	d := &Driver{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	other := map[string]string{LabelSandbox: "0123456789ab", LabelStateDir: "/elsewhere/sandboxes/0123456789ab"}
	forged := map[string]string{LabelSandbox: "0123456789ab"}
	for range 3 {
		d.leftAlone("c-other", []string{"/" + containerName("0123456789ab")}, other)
		d.leftAlone("c-forged", []string{"/innocent"}, forged)
	}
	logged := buf.String()
	if n := strings.Count(logged, "level=DEBUG msg=\"another installation's sandbox"); n != 3 {
		t.Errorf("%d debug notes of another installation's sandbox, want 3:\n%s", n, logged)
	}
	if n := strings.Count(logged, "level=WARN"); n != 1 || !strings.Contains(logged, "container=c-forged") {
		t.Errorf("%d warnings, want one, of c-forged:\n%s", n, logged)
	}
}

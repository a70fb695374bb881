package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// hostileFilesJob writes the files the issue timed (each a single long
// line), one within the viewer's limits that takes the Java lexer
// seconds, and a Go file.
const hostileFilesJob = `python3 -c "
open('a.dts', 'w').write(';' * 8000)
open('a.json', 'w').write('/' * 16000)
open('Main.java', 'w').write('a ' * 8000)
open('Slow.java', 'w').write(('a ' * 499 + '\n') * 128)
" && printf 'package main\n\nfunc main() {}\n' > main.go`

// TestUIViewHostileFiles: the web UI's viewer, through a server's route,
// on files a real sandbox wrote: each hostile one answers within 2 s, as
// plain text, saying why; the Go file is highlighted.
func TestUIViewHostileFiles(t *testing.T) {
	s := newServer(t)
	s.start()
	id, code := s.submit(hostileFilesJob)
	if code != http.StatusCreated && code != http.StatusAccepted {
		t.Fatalf("submit: %d", code)
	}
	waitUntil(t, 2*time.Minute, func() bool { return s.job(id).Status == "complete" })
	for _, tt := range []struct{ path, want string }{
		{"a.dts", "a line is over 1000 bytes"},
		{"a.json", "a line is over 1000 bytes"},
		{"Main.java", "a line is over 1000 bytes"},
		{"Slow.java", "highlighting it took more than 1s"},
		{"main.go", `<span class="kn">package</span>`},
	} {
		start := time.Now()
		body := string(s.get(t, "/ui/jobs/"+id+"/view?path="+url.QueryEscape(tt.path), http.StatusOK))
		took := time.Since(start)
		t.Logf("%s: %v", tt.path, took)
		if took > 2*time.Second || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %v, want %q in:\n%.600s", tt.path, took, tt.want, body)
		}
	}
}

package main

import (
	"archive/zip"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The new-job form's browser tests: submitted with the keyboard alone,
// an API error shown at its field, and a folder and a zip uploaded as
// the job's workspace.

// focused describes the focused element: "#id", "radio:value", or its tag,
// class and link or text.
const focused = `(e => e.id ? "#" + e.id : e.type === "radio" ? "radio:" + e.value :
	e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + "[" + (e.getAttribute("href") || e.textContent.trim()) + "]")(document.activeElement)`

// openNewJob signs in and opens the form.
func openNewJob(t *testing.T, s *server) *uiTab {
	t.Helper()
	tab := openUI(t, s)
	tab.signIn(testToken)
	tab.wait("the job list", `location.pathname === "/" && !!document.querySelector('a[href="/new"]')`, 20*time.Second)
	tab.reopenForm()
	return tab
}

// reopenForm loads /new and waits for its script.
func (tab *uiTab) reopenForm() {
	tab.t.Helper()
	tab.run("open the form", chromedp.Navigate(tab.s.url+"/new"))
	tab.wait("the form's script", `document.querySelector('#new-job')?.dataset.ready === "true"`, 20*time.Second)
}

// tabTo presses Tab once per want, checking where focus lands each time.
func (tab *uiTab) tabTo(want ...string) {
	tab.t.Helper()
	var got []string
	for range want {
		tab.run("press Tab", chromedp.KeyEvent(kb.Tab))
		got = append(got, evalUI[string](tab, focused))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		tab.t.Fatalf("Tab went through %q, want %q", got, want)
	}
}

// landedJob waits for the job's page after a submission and returns its id.
func (tab *uiTab) landedJob() string {
	tab.t.Helper()
	tab.wait("the job's page", `location.pathname.startsWith("/jobs/")`, 60*time.Second)
	return strings.TrimPrefix(evalUI[string](tab, `decodeURIComponent(location.pathname)`), "/jobs/")
}

// TestUINewJobKeyboard fills in and submits the form with the keyboard
// alone: Tab from the page's start reaches the task after the header's
// five controls, the limits and the source follow, Enter on the button
// submits, and the job exists.
func TestUINewJobKeyboard(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	tab := openNewJob(t, s)
	tab.shot("empty")
	tab.tabTo(`a.skip[#main]`, `a.brand[/]`, `a[/]`, `a[/new]`, `button[Sign out]`, `#task`)
	tab.run("type the task", chromedp.KeyEvent("echo typed with the keyboard > out.txt"))
	tab.tabTo("#model", "#image", "#timeout", "#max_steps", "#memory", "#cpus", "#disk", "radio:none", "#submit")
	tab.run("press Enter on the button", chromedp.KeyEvent(kb.Enter))
	id := tab.landedJob()
	var job struct{ Task, Status string }
	if code := s.do("GET", "/v1/jobs/"+id, nil, &job); code != 200 || job.Task != "echo typed with the keyboard > out.txt" {
		t.Fatalf("the job %s: %d %+v", id, code, job)
	}
	// The job's page shows it reach complete, without a reload.
	tab.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.logs)
	}
	tab.wait("complete on the job's page", `window.notReloaded && document.querySelector(".job-bar .status").textContent === "complete"`, 30*time.Second)
	tab.shot("complete")
	if b := s.get(t, "/v1/jobs/"+id+"/files/out.txt", 200); string(b) != "typed with the keyboard\n" {
		t.Errorf("out.txt = %q", b)
	}
}

// TestUINewJobFieldErrors submits (Ctrl+Enter in the task) what the API
// refuses, and finds each message next to its input, which is marked
// invalid and described by it; what concerns no field (an upload that is
// no archive) in the alert above the form. A fixed form then goes
// through. The form fits a 360 px wide screen.
func TestUINewJobFieldErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	tab := openNewJob(t, s)
	tab.run("fill in the form",
		chromedp.SendKeys(chromedp.CSS(`#task`), "echo never runs"),
		chromedp.SendKeys(chromedp.CSS(`#memory`), "1k"),
		chromedp.SendKeys(chromedp.CSS(`#model`), "nonsense"),
		chromedp.Focus(chromedp.CSS(`#task`)),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	tab.wait("the memory's error", `document.querySelector('#memory').getAttribute('aria-invalid') === "true"`, 20*time.Second)
	tab.fieldError("memory", "64MiB")
	tab.fieldError("model", "anthropic:NAME")
	if got := evalUI[string](tab, focused); got != "#model" {
		t.Errorf("focus after the errors: %s, want the first invalid field", got)
	}
	if n := evalUI[int](tab, `document.querySelectorAll('[aria-invalid="true"]').length`); n != 2 {
		t.Errorf("%d invalid fields, want 2", n)
	}
	if evalUI[bool](tab, `!document.getElementById("form-problem").hidden`) {
		t.Errorf("the alert shows %q though every error found its field", evalUI[string](tab, `document.getElementById("form-problem").textContent`))
	}
	tab.shot("errors")
	tab.run("narrow screen", chromedp.EmulateViewport(360, 800))
	if w := evalUI[int](tab, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("the form is %d px wide on a 360 px screen", w)
	}
	tab.shot("errors-360px")
	tab.run("wide screen", chromedp.EmulateViewport(1280, 900))

	tab.reopenForm()
	tab.run("a repository without its URL",
		chromedp.SendKeys(chromedp.CSS(`#task`), "echo never runs"),
		chromedp.Click(chromedp.CSS(`input[name=source][value=repo]`)),
		chromedp.Click(chromedp.CSS(`#repo-pr`)),
		chromedp.Click(chromedp.CSS(`#submit`)),
	)
	tab.wait("the URL's error", `document.querySelector('#repo-url').getAttribute('aria-invalid') === "true"`, 20*time.Second)
	tab.fieldError("repo-url", "repo.url is required")
	tab.shot("repo-error")

	tab.run("an upload of nothing",
		chromedp.Click(chromedp.CSS(`input[name=source][value=upload]`)),
		chromedp.Click(chromedp.CSS(`#submit`)),
	)
	tab.wait("the upload's error", `document.querySelector('#upload-archive').getAttribute('aria-invalid') === "true"`, 20*time.Second)
	tab.fieldError("upload-archive", "Choose a .zip or .tar.gz file")

	archive := filepath.Join(t.TempDir(), "not-a.zip")
	writeFile(t, archive, "a zip by its name only\n")
	tab.run("an upload of a file that is no archive",
		chromedp.SetUploadFiles(chromedp.CSS(`#upload-archive`), []string{archive}),
		chromedp.Click(chromedp.CSS(`#submit`)),
	)
	tab.wait("the alert", `!document.getElementById("form-problem").hidden`, 20*time.Second)
	if n := evalUI[int](tab, `document.querySelectorAll('[aria-invalid="true"]').length`); n != 0 {
		t.Errorf("%d invalid fields after an error of none", n)
	}
	if msg := evalUI[string](tab, `document.getElementById("form-problem").textContent`); !strings.Contains(msg, "neither a zip nor a tar.gz") {
		t.Errorf("the alert says %q", msg)
	}
	tab.shot("alert")

	tab.reopenForm()
	tab.run("narrow screen", chromedp.EmulateViewport(360, 800))
	tab.shot("empty-360px")
	tab.run("fill in the form right and submit",
		chromedp.SendKeys(chromedp.CSS(`#task`), "echo fixed"),
		chromedp.SendKeys(chromedp.CSS(`#memory`), "512m"),
		chromedp.Click(chromedp.CSS(`#submit`)),
	)
	tab.landedJob()
}

// fieldError checks that input id is marked invalid and described by its
// message, the element after it, which holds want.
func (tab *uiTab) fieldError(id, want string) {
	tab.t.Helper()
	got := evalUI[string](tab, fmt.Sprintf(`(() => {
		const el = document.getElementById(%[1]q), msg = document.getElementById(%[1]q + "-error");
		return [el.getAttribute("aria-invalid"), el.nextElementSibling === msg, msg.hidden,
			(el.getAttribute("aria-describedby") || "").split(" ").includes(msg.id), msg.textContent].join("|");
	})()`, id))
	if !strings.HasPrefix(got, "true|true|false|true|") || !strings.Contains(got, want) {
		tab.t.Errorf("%s: invalid|next|hidden|described|message = %q, want a message with %q", id, got, want)
	}
}

// TestUINewJobUpload uploads a folder (packed as a tar.gz by the page:
// names past ustar's 100 bytes go into its prefix or a PAX header) and a
// zip, and finds their files in the jobs' workspaces.
func TestUINewJobUpload(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	tab := openNewJob(t, s)
	dir := t.TempDir()
	folder := filepath.Join(dir, "project")
	deep := strings.Repeat("a-directory-name-of-some-length/", 4) + "deep.txt" // 132 bytes: a ustar prefix
	long := strings.Repeat("a-very-long-file-name-", 6) + ".txt"               // one name of 136 bytes: PAX
	files := map[string]string{"README.md": "hello from a folder\n", "src/main.go": "package main\n", deep: "deep\n", long: "long\n", "ünïcödé.txt": "utf-8\n"}
	for name, body := range files {
		writeFile(t, filepath.Join(folder, name), body)
	}
	if err := os.Symlink("README.md", filepath.Join(folder, "link")); err != nil {
		t.Fatal(err)
	}

	t.Run("folder", func(t *testing.T) {
		tab.t = t
		tab.run("choose the folder",
			chromedp.SendKeys(chromedp.CSS(`#task`), "cat README.md && wc -c src/main.go"),
			chromedp.Click(chromedp.CSS(`input[name=source][value=upload]`)),
			chromedp.SetUploadFiles(chromedp.CSS(`#upload-folder`), []string{folder}),
		)
		tab.wait("the folder's summary", `document.getElementById("progress-text").textContent.startsWith("5 files")`, 10*time.Second)
		tab.shot("folder-chosen")
		tab.run("submit", chromedp.Click(chromedp.CSS(`#submit`)))
		id := tab.landedJob()
		if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
			t.Fatalf("job %+v\n%s", j, s.logs)
		}
		s.getAny(t, "/v1/jobs/"+id+"/files/link") // the browser leaves symbolic links out
		for name, body := range files {
			if b := s.get(t, "/v1/jobs/"+id+"/files/"+escapePath(name), 200); string(b) != body {
				t.Errorf("%s = %q, want %q", name, b, body)
			}
		}
	})

	t.Run("zip", func(t *testing.T) {
		tab.t = t
		archive := filepath.Join(dir, "project.zip")
		writeZip(t, archive, map[string]string{"README.md": "hello from a zip\n"})
		tab.reopenForm()
		tab.run("choose the zip",
			chromedp.SendKeys(chromedp.CSS(`#task`), "cat README.md > seen.txt"),
			chromedp.Click(chromedp.CSS(`input[name=source][value=upload]`)),
			chromedp.SetUploadFiles(chromedp.CSS(`#upload-archive`), []string{archive}),
			chromedp.Click(chromedp.CSS(`#submit`)),
		)
		id := tab.landedJob()
		if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
			t.Fatalf("job %+v\n%s", j, s.logs)
		}
		if b := s.get(t, "/v1/jobs/"+id+"/files/seen.txt", 200); string(b) != "hello from a zip\n" {
			t.Errorf("seen.txt = %q", b)
		}
	})
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// escapePath escapes each segment of a slash-separated path for a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

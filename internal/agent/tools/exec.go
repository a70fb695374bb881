package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// run executes req in the sandbox with the given timeout, capping each
// output stream near max bytes, and passes its output to out as it is
// produced when out is set. Only a broken guest or a canceled ctx is an
// error; everything about the command itself is in the result, and a
// command cut by ctx's end leaves the output it had in the result.
func run(ctx context.Context, g *guest.Client, req guest.ExecRequest, timeout time.Duration, max int, out func(stream string, p []byte)) (guest.ExecResult, error) {
	req.TimeoutMS = timeout.Milliseconds()
	req.MaxOutput = int64(max)
	var res guest.ExecResult
	var err error
	if out != nil {
		res, err = g.ExecWatch(ctx, req, out)
	} else {
		res, err = g.Exec(ctx, req)
	}
	if err == nil {
		err = canceled(ctx)
	}
	return res, err
}

// cutText is a command's result when its step was cut short (a job's
// timeout, a cancel): why, in one plain line, then the output it had.
func cutText(ctx context.Context, res guest.ExecResult, max int) string {
	var b strings.Builder
	b.WriteString("not completed: " + StopReason(ctx) + "\n")
	room := max - b.Len() - 60
	outMax, errMax := share(room, len(res.Stdout), len(res.Stderr))
	section(&b, "stdout", Truncate(string(res.Stdout), outMax))
	section(&b, "stderr", Truncate(string(res.Stderr), errMax))
	return b.String()
}

// StopReason says in one plain line why ctx ended: "canceled", "timed
// out", or its cause's own words ("job timed out after 5s", "canceled by
// request"); "" while it has not.
func StopReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case cause == nil:
		return ""
	case cause == context.Canceled:
		return "canceled"
	case cause == context.DeadlineExceeded:
		return "timed out"
	}
	return cause.Error()
}

// execText renders a command's result for the model: the exit code, what
// happened to the command (timeout, out of memory, a signal, truncation) and
// its stdout and stderr, each labelled, within max bytes in all.
func execText(res guest.ExecResult, timeout time.Duration, max int) string {
	return execTextSpill(res, timeout, max, "")
}

// spillOutput saves a command's whole output in the workspace when it is
// too large to show, and returns the note naming the file ("" if not saved).
func spillOutput(ctx context.Context, env *Env, res guest.ExecResult) string {
	if env.SpillDir == "" || len(res.Stdout)+len(res.Stderr) <= env.maxOutput() {
		return ""
	}
	path := strings.TrimSuffix(env.SpillDir, "/") + "/" + time.Now().UTC().Format("20060102-150405") + "-" + rand.Text()[:8] + ".txt"
	var b strings.Builder
	section(&b, "stdout", string(res.Stdout))
	section(&b, "stderr", string(res.Stderr))
	if _, err := env.Guest.WriteFile(ctx, path, []byte(b.String()), 0o644); err != nil {
		return ""
	}
	return fmt.Sprintf("the whole output (%d bytes) is saved in /workspace/%s: read it with read_file or search it with search_files", b.Len(), path)
}

// execTextSpill is execText naming where the whole output was saved.
func execTextSpill(res guest.ExecResult, timeout time.Duration, max int, spilled string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d%s\n", res.ExitCode, exitMeaning(res))
	notes := execNotes(res, timeout)
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	stdout, stderr := string(res.Stdout), string(res.Stderr)
	if stdout == "" && stderr == "" {
		b.WriteString("(no output)\n")
		return b.String()
	}
	room := max - b.Len() - 60 // the section labels
	if len(stdout)+len(stderr) > room && (!res.Truncated || spilled != "") {
		note := truncatedNote(int64(len(stdout)), int64(len(stderr)))
		if spilled != "" {
			note = fmt.Sprintf("output shortened: stdout was %d bytes and stderr %d bytes, and the middle was cut; %s.", len(stdout), len(stderr), spilled)
		}
		b.WriteString(note + "\n")
		room -= len(note) + 1
	}
	outMax, errMax := share(room, len(stdout), len(stderr))
	stdout, stderr = Truncate(stdout, outMax), Truncate(stderr, errMax)
	section(&b, "stdout", stdout)
	section(&b, "stderr", stderr)
	return b.String()
}

func exitMeaning(res guest.ExecResult) string {
	switch {
	case res.ExitCode == 0:
		return " (success)"
	case res.Signal != "":
		return " (killed by " + res.Signal + ")"
	case res.ExitCode == 127 && res.StartError != "":
		return " (command not found)"
	}
	return " (failure)"
}

func execNotes(res guest.ExecResult, timeout time.Duration) []string {
	var notes []string
	if res.TimedOut {
		notes = append(notes, fmt.Sprintf("timed out after %s and was killed, with every process it started; the output up to then is below. Raise timeout_seconds (up to %d), or start long-running work in the background with its output redirected to a file.", seconds(timeout), int(MaxTimeout.Seconds())))
	}
	if res.OOMKilled {
		notes = append(notes, "killed: out of memory. The sandbox's memory limit was reached; use less memory (process data in chunks or streams, fewer parallel jobs).")
	}
	if res.StartError != "" {
		notes = append(notes, "could not start: "+res.StartError)
	}
	if res.Truncated {
		notes = append(notes, truncatedNote(res.StdoutBytes, res.StderrBytes))
	}
	if diskFull(res) {
		notes = append(notes, diskFullNote)
	}
	return notes
}

// diskFullNote tells the model why writes fail once the sandbox's disk
// quota is used up, and what to do.
const diskFullNote = "the workspace's disk quota is full (No space left on device / File too large): writes fail until files are removed. Delete what is not needed (build outputs, caches, large generated files: du -sh /workspace/* shows what is big), then go on."

// diskFull reports whether a command failed on a full quota: ENOSPC or
// EFBIG in its error output, or killed by SIGXFSZ (exit 153).
func diskFull(res guest.ExecResult) bool {
	if res.ExitCode == 0 {
		return false
	}
	if res.ExitCode == 128+25 {
		return true
	}
	return bytes.Contains(res.Stderr, []byte("No space left on device")) || bytes.Contains(res.Stderr, []byte("File too large"))
}

func truncatedNote(stdout, stderr int64) string {
	return fmt.Sprintf("output truncated: stdout was %d bytes and stderr %d bytes, and the middle was cut. To see all of it, redirect the output to a file (cmd > out.txt 2>&1) and read it with read_file or search it with search_files.", stdout, stderr)
}

func section(b *strings.Builder, name, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "<%s>\n%s", name, strings.ToValidUTF8(text, "\uFFFD"))
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	fmt.Fprintf(b, "</%s>\n", name)
}

// share splits room bytes between two texts of lengths a and b: each gets
// all it needs if both fit; otherwise the shorter gets up to half and the
// longer the rest.
func share(room, a, b int) (int, int) {
	room = max(room, 200)
	if a+b <= room {
		return a, b
	}
	if a <= b {
		a = min(a, room/2)
		return a, room - a
	}
	b = min(b, room/2)
	return room - b, b
}

func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return d.String()
}

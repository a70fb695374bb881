package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/wire"
)

// logsOptions are the options of `agentbox logs` (and submit --follow).
type logsOptions struct {
	noFollow, json bool
	after          int64
}

func newLogsCmd(a *app) *cobra.Command {
	var f clientFlags
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs [flags] JOB_ID",
		Short: "Print a job's steps as they happen",
		Long: `logs follows a job's event stream and prints each step as it happens: the
output of commands raw on stdout; state changes, commands and exit codes as
short lines on stderr. It returns when the job ends, exiting 0 if the job
completed and 1 otherwise. A dropped connection is resumed where it broke.

--no-follow prints what exists now and exits (0 only if the job completed).
--json prints each event as one JSON object per line instead.` + clientEnvHelp,
		Example: `  agentbox logs job_0193b2c4d5e6f7a8b9c
  agentbox logs --no-follow job_0193b2c4d5e6f7a8b9c > output.txt
  agentbox logs --json job_0193b2c4d5e6f7a8b9c | jq -c 'select(.type=="command")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			return followJob(cmd, c, args[0], o)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&o.noFollow, "no-follow", false, "print the events so far and exit")
	fl.Int64Var(&o.after, "after", 0, "start after this event seq")
	fl.BoolVar(&o.json, "json", false, "print events as JSON lines")
	return cmd
}

// followJob prints the job's events and turns its outcome into the exit code.
func followJob(cmd *cobra.Command, c *client.Client, id string, o logsOptions) error {
	ctx := cmd.Context()
	p := &eventPrinter{out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(), json: o.json}
	var err error
	if o.noFollow {
		err = printExisting(ctx, c, id, o.after, p.print)
	} else {
		err = c.Follow(ctx, id, o.after, p.print)
	}
	if ctx.Err() != nil {
		return exitError{130}
	}
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	j, err := c.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	if j.Status == "complete" {
		return nil
	}
	if !o.json && (j.Status == "error" || j.Status == "canceled") {
		fmt.Fprintf(cmd.ErrOrStderr(), "job %s ended %s%s\n", id, j.Status, prefixed(": ", j.Error))
	} else if !o.json {
		fmt.Fprintf(cmd.ErrOrStderr(), "job %s is %s, not ended yet\n", id, j.Status)
	}
	return exitError{1}
}

func printExisting(ctx context.Context, c *client.Client, id string, after int64, fn func(wire.Event) error) error {
	for {
		page, err := c.Events(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		for _, ev := range page.Events {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if !page.HasMore {
			return nil
		}
		after = page.NextAfter
	}
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// eventPrinter shows events the way a person follows a job.
type eventPrinter struct {
	out, errw io.Writer
	json      bool
}

func (p *eventPrinter) print(ev wire.Event) error {
	if p.json {
		return json.NewEncoder(p.out).Encode(ev)
	}
	return p.show(ev.Type, ev.Payload)
}

// show prints one event: what the job did on stdout, bookkeeping on stderr.
// An event of a type it does not know is shown raw.
func (p *eventPrinter) show(typ string, payload json.RawMessage) error {
	ev, _ := event.Decode(typ, payload)
	var err error
	switch ev := ev.(type) {
	case event.Model:
		err = p.showModel(ev)
	case event.ToolCall:
		_, err = fmt.Fprintf(p.errw, "▶ %s %s\n", printable(ev.Name), printable(firstLine(compactJSON(ev.Input), 300)))
	case event.ToolResult:
		err = p.showResult(ev)
	case event.Notice:
		_, err = fmt.Fprintf(p.errw, "[agentbox] %s\n", ev.Text)
	case event.Output:
		_, err = io.WriteString(p.out, printable(ev.Text))
	case event.State:
		_, err = fmt.Fprintf(p.errw, "[%s]%s%s\n", ev.Status, prefixed(" attempt ", nonZero(ev.Attempt)), prefixed(" ", ev.Error))
	case event.Command:
		_, err = fmt.Fprintf(p.errw, "$ %s\n", firstLine(ev.Command, 200))
	case event.Exit:
		_, err = fmt.Fprintf(p.errw, "[exit %d after %dms%s]\n", ev.ExitCode, ev.DurationMS, exitNotes(ev))
	case event.Sandbox:
		_, err = fmt.Fprintf(p.errw, "[sandbox %s ready in %dms]\n", ev.SandboxID, ev.ReadyMS)
	case event.Log:
		_, err = fmt.Fprintf(p.errw, "[%s] %s\n", firstNonEmpty(ev.Level, "log"), ev.Message)
	default:
		_, err = fmt.Fprintf(p.errw, "[%s] %s\n", typ, firstLine(string(payload), 200))
	}
	return err
}

// showModel prints the model's text of a step.
func (p *eventPrinter) showModel(ev event.Model) error {
	if text := strings.TrimSpace(ev.Message.PlainText()); text != "" {
		_, err := fmt.Fprintf(p.out, "%s\n", printable(text))
		return err
	}
	return nil
}

// showResult prints a tool's result, at most resultLines lines of it.
func (p *eventPrinter) showResult(ev event.ToolResult) error {
	const resultLines = 20
	lines := strings.Split(strings.TrimRight(ev.Text, "\n"), "\n")
	mark := "│"
	if ev.IsError {
		mark = "✗"
	}
	var sb strings.Builder
	for i, l := range lines {
		if i == resultLines {
			fmt.Fprintf(&sb, "  %s … %d more lines\n", mark, len(lines)-resultLines)
			break
		}
		fmt.Fprintf(&sb, "  %s %s\n", mark, printable(l))
	}
	_, err := io.WriteString(p.out, sb.String())
	return err
}

// printable drops control characters but newline and tab: text from the
// sandbox or the model must not drive the terminal (escape sequences can
// rewrite the screen or the clipboard).
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f)) {
			return r
		}
		return -1
	}, s)
}

// compactJSON renders a JSON value on one line, object keys sorted.
func compactJSON(raw json.RawMessage) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	b, _ := json.Marshal(v)
	return string(b)
}

func exitNotes(ev event.Exit) string {
	var notes []string
	if ev.TimedOut {
		notes = append(notes, "timed out")
	}
	if ev.Truncated {
		notes = append(notes, "output truncated")
	}
	return prefixed(", ", strings.Join(notes, ", "))
}

// nonZero renders n, or "" for 0 (a field the event does not have).
func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

package chat

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbox/agentbox/internal/render"
)

// Summary is a saved session as a listing shows it.
type Summary struct {
	Name string
	// Project is what the session works on.
	Project Project
	// Last is the user's last message, one line, cut; "" if none.
	Last string
	// Saved is when the session was last saved.
	Saved time.Time
}

// maxListed bounds the sessions List reads.
const maxListed = 1000

// List returns the sessions saved in dir (<data dir>/chats), the most
// recently saved first. Entries that are not sessions are left out.
func List(dir string) ([]Summary, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []Summary
	for _, e := range entries {
		if !e.IsDir() || !sessionName.MatchString(e.Name()) {
			continue
		}
		m, ok, err := loadMeta(filepath.Join(dir, e.Name()))
		if !ok && err == nil {
			continue
		}
		out = append(out, Summary{Name: e.Name(), Project: m.Project, Last: m.Last, Saved: m.Saved})
		if len(out) == maxListed {
			break
		}
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Or(b.Saved.Compare(a.Saved), strings.Compare(a.Name, b.Name)) })
	return out, nil
}

// WriteSessions writes the listing of sessions to w: name (current
// marked), workspace, age and last message, one session a line.
func WriteSessions(w io.Writer, sessions []Summary, current string, now time.Time) error {
	if len(sessions) == 0 {
		_, err := fmt.Fprintln(w, "no saved sessions")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SESSION\tWORKSPACE\tSAVED\tLAST MESSAGE")
	for _, s := range sessions {
		mark := "  "
		if s.Name == current {
			mark = "* "
		}
		last := "-"
		if s.Last != "" {
			last = oneLine(s.Last, lastLen)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", mark, s.Name, oneLine(s.Project.String(), 80), render.Ago(now.Sub(s.Saved)), last)
	}
	return tw.Flush()
}

// oneLine is s's first line, without control characters (tabs made
// spaces), cut to n runes; "…" marks what was left out.
func oneLine(s string, n int) string {
	first, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	first = strings.ReplaceAll(render.Printable(strings.TrimSpace(first)), "\t", " ")
	cut := strings.TrimSpace(rest) != ""
	if r := []rune(first); len(r) > n {
		first, cut = string(r[:n-1]), true
	}
	if cut {
		first = strings.TrimRight(first, " ") + "…"
	}
	return first
}

package githost

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Commit records the tree workDir holds as a commit on branch in the
// host's git dir: on the branch's last commit, or on BaseRef when the
// branch does not exist yet, authored and committed by the host's Author
// with message. It returns the branch's commit and whether it made one: a
// tree equal to its parent's makes none. A workspace with files past the
// bounds of one read (a sparse file, more than 2 GiB of content, more
// than 500,000 entries or 64 MiB of paths, a path of 4096 bytes) is not
// committed: an error names them. A .gitignore taken as absent (see
// ignorer) is named in the message, as the commit holds what it
// ignores. Call it only once nothing writes workDir any more.
func (h *Host) Commit(ctx context.Context, gitDir, workDir, branch, message string) (commit string, created bool, err error) {
	if err := CheckBranch(branch); err != nil {
		return "", false, err
	}
	ref := "refs/heads/" + branch
	parent, err := h.commitOf(ctx, gitDir, ref)
	old := parent
	if err != nil {
		if parent, err = h.commitOf(ctx, gitDir, BaseRef); err != nil {
			return "", false, fmt.Errorf("commit: %s has no base commit", gitDir)
		}
		old = ""
	}
	from, tree, notes, err := h.worktree(ctx, gitDir, workDir, parent)
	if err != nil {
		return "", false, fmt.Errorf("commit: %w", err)
	}
	if n := notes.lacking; n.len() > 0 {
		return "", false, fmt.Errorf("commit: %d files were not read or left out, so the workspace cannot be committed: %s", n.len(), n.first(5))
	}
	if n := notes.rules; n.len() > 0 {
		message = withNote(message, "agentbox took these .gitignore files as absent, so this commit holds what they ignore: "+n.first(5))
	}
	if tree == from {
		if old == "" {
			_, err = h.git(ctx, run{args: []string{"update-ref", ref, parent, ""}, gitDir: gitDir})
		}
		return parent, false, err
	}
	if commit, err = h.commitTree(ctx, gitDir, tree, parent, message); err != nil {
		return "", false, fmt.Errorf("commit: %w", err)
	}
	// old as the expected value: two commits at once cannot both win.
	if _, err := h.git(ctx, run{args: []string{"update-ref", ref, commit, old}, gitDir: gitDir}); err != nil {
		return "", false, fmt.Errorf("commit: %w", err)
	}
	return commit, true, nil
}

// withNote adds paragraph note to a commit message, before its trailers
// (a last paragraph of "Key: value" lines) if it ends with some.
func withNote(message, note string) string {
	body := strings.TrimRight(message, "\n")
	if i := strings.LastIndex(body, "\n\n"); i >= 0 && trailers.MatchString(body[i+2:]) {
		return body[:i] + "\n\n" + note + body[i:] + "\n"
	}
	return body + "\n\n" + note + "\n"
}

// trailers matches a paragraph of git trailers.
var trailers = regexp.MustCompile(`^([A-Za-z0-9-]+: [^\n]*\n?)+$`)

// Push pushes branch of the host's git dir to the same branch of
// remoteURL with the host's credentials (a fast-forward; a push the
// remote refuses is an error saying why).
func (h *Host) Push(ctx context.Context, gitDir, remoteURL, branch string) error {
	rm, err := h.remote(remoteURL)
	if err == nil {
		err = CheckBranch(branch)
	}
	if err != nil {
		return err
	}
	ref := "refs/heads/" + branch
	_, err = h.git(ctx, run{args: []string{"push", "--quiet", "--no-verify", "--", rm.url, ref + ":" + ref}, gitDir: gitDir, remote: &rm})
	if err != nil {
		return fmt.Errorf("push %s to %s: %w", branch, Redact(remoteURL), err)
	}
	return nil
}

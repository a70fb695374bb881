package githost

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// BaseRef is the ref of a git dir that holds the commit a job started
// from (Clone's and Snapshot's).
const BaseRef = "refs/agentbox/base"

// Snapshot records the tree workDir holds as a commit in the host's git
// dir gitDir (made if it does not exist), and returns it: the base the
// diff of a job that started from no repository is taken against. An
// empty workspace makes a commit of the empty tree.
func (h *Host) Snapshot(ctx context.Context, gitDir, workDir string) (string, error) {
	if err := h.InitBare(ctx, gitDir); err != nil {
		return "", err
	}
	tree, _, err := h.writeTree(ctx, gitDir, workDir, "")
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	commit, err := h.commitTree(ctx, gitDir, tree, "", "agentbox: the starting workspace")
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if _, err := h.git(ctx, run{args: []string{"update-ref", BaseRef, commit}, gitDir: gitDir}); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return commit, nil
}

// Diff writes to w the unified diff of the tree workDir holds against
// base (a commit of gitDir; "" for the empty tree): changed, new (ignored
// ones but those base has left out) and deleted files, links as links,
// binary files named ("Binary files a/x and b/x differ"). gitDir is made
// if it does not exist. Call it only once nothing writes workDir any more
// (the sandbox is gone).
func (h *Host) Diff(ctx context.Context, gitDir, workDir, base string, w io.Writer) error {
	from, tree, _, err := h.worktree(ctx, gitDir, workDir, base)
	if err != nil {
		return err
	}
	_, err = h.git(ctx, run{args: []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options", from, tree},
		gitDir: gitDir, stdout: w})
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

// FormatPatch writes to w what `git format-patch --stdout` makes of the
// tree workDir holds committed on base with message (its first line the
// subject), authored by the host's Author: a mail git am applies. Nothing
// is written when the tree is base's. The commit is left unreferenced.
func (h *Host) FormatPatch(ctx context.Context, gitDir, workDir, base, message string, w io.Writer) error {
	from, tree, _, err := h.worktree(ctx, gitDir, workDir, base)
	if err != nil {
		return err
	}
	if base == "" || tree == from {
		if base == "" {
			return fmt.Errorf("format-patch: no base commit")
		}
		return nil
	}
	commit, err := h.commitTree(ctx, gitDir, tree, base, message)
	if err != nil {
		return fmt.Errorf("format-patch: %w", err)
	}
	_, err = h.git(ctx, run{args: []string{"format-patch", "--stdout", "--no-color", "--no-signature", "--end-of-options", base + ".." + commit},
		gitDir: gitDir, stdout: w})
	if err != nil {
		return fmt.Errorf("format-patch: %w", err)
	}
	return nil
}

// worktree records workDir's tree in gitDir and returns it with base's
// tree (the empty tree for "") and the notes of writeTree.
func (h *Host) worktree(ctx context.Context, gitDir, workDir, base string) (from, tree string, notes treeNotes, err error) {
	if err := h.InitBare(ctx, gitDir); err != nil {
		return "", "", notes, err
	}
	r := run{args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", base + "^{tree}"}, gitDir: gitDir}
	if base == "" {
		r = run{args: []string{"mktree"}, gitDir: gitDir, stdin: strings.NewReader("")}
	}
	out, err := h.git(ctx, r)
	if err != nil {
		return "", "", notes, fmt.Errorf("base %q of %s: %w", base, gitDir, err)
	}
	tree, notes, err = h.writeTree(ctx, gitDir, workDir, base)
	return line(out), tree, notes, err
}

// commitTree makes a commit of tree on parent ("" for none), by the
// host's Author, and returns it.
func (h *Host) commitTree(ctx context.Context, gitDir, tree, parent, message string) (string, error) {
	args := []string{"commit-tree", "-F", "-"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	args = append(args, "--end-of-options", tree)
	out, err := h.git(ctx, run{args: args, gitDir: gitDir, stdin: strings.NewReader(message)})
	return line(out), err
}

package githost

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/internal/ignore"
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
	return h.DiffWith(ctx, gitDir, workDir, base, DiffOptions{}, w)
}

// DiffOptions choose what a diff leaves out.
type DiffOptions struct {
	// All keeps what the .gitignore files ignore and the caches
	// (ignore.Caches), which a diff otherwise leaves out.
	All bool
}

// DiffWith is Diff as opts say: without All, what is under a cache
// directory (__pycache__, node_modules, ...) is left out too, wherever
// it is and whether or not base has it.
func (h *Host) DiffWith(ctx context.Context, gitDir, workDir, base string, opts DiffOptions, w io.Writer) error {
	from, tree, _, err := h.worktreeAll(ctx, gitDir, workDir, base, opts.All)
	if err != nil {
		return err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--end-of-options", from, tree}
	if !opts.All {
		args = append(args, "--")
		for _, c := range ignore.Caches {
			args = append(args, ":(exclude,glob)**/"+c+"/**")
		}
	}
	_, err = h.git(ctx, run{args: args, gitDir: gitDir, stdout: w})
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
	return h.worktreeAll(ctx, gitDir, workDir, base, false)
}

// worktreeAll is worktree, with all keeping what .gitignore ignores.
func (h *Host) worktreeAll(ctx context.Context, gitDir, workDir, base string, all bool) (from, tree string, notes treeNotes, err error) {
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
	tree, notes, err = h.writeTreeAll(ctx, gitDir, workDir, base, all)
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

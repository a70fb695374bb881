package githost

import (
	"context"
	"fmt"
	"strings"
)

// BaseBranch returns the remote's branch that work started at ref is to
// be merged into, from gitDir, a clone's git dir: ref itself when the
// remote has a branch of that name ("main", "refs/heads/main"), else (a
// tag, a commit, "") the remote's default branch, the clone's HEAD.
func (h *Host) BaseBranch(ctx context.Context, gitDir, ref string) (string, error) {
	if name := strings.TrimPrefix(ref, "refs/heads/"); name != "" && CheckBranch(name) == nil {
		if _, err := h.commitOf(ctx, gitDir, "refs/heads/"+name); err == nil {
			return name, nil
		}
	}
	out, err := h.git(ctx, run{args: []string{"symbolic-ref", "--quiet", "HEAD"}, gitDir: gitDir})
	head, ok := strings.CutPrefix(line(out), "refs/heads/")
	if err != nil || !ok || head == "" {
		return "", fmt.Errorf("the remote's default branch: %s has no HEAD branch (%v)", gitDir, err)
	}
	return head, nil
}

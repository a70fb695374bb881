package githost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// CloneRequest says what Clone clones, and where.
type CloneRequest struct {
	// URL is the remote (see CheckURL); Ref the branch, tag or commit to
	// start from ("" for the remote's default branch).
	URL, Ref string
	// Branch is the branch checked out in WorkDir at the base commit.
	Branch string
	// GitDir is the host's git dir for the job: made anew, a bare clone
	// of URL fetched with the host's credentials. It must not be in the
	// workspace.
	GitDir string
	// WorkDir is the workspace: an empty directory that gets the
	// checkout and a .git of its own for the sandbox.
	WorkDir string
}

// Clone clones r.URL into the host's git dir with the host's credentials,
// resolves r.Ref there, points the git dir's branch r.Branch at it, and
// gives r.WorkDir a checkout of it on branch r.Branch with a .git of its
// own: a copy of the host's objects (no hard links, which would let the
// sandbox write the host's), remote
// origin the URL without user information, no credential helper, hooks
// or anything of the host's config; user.name and user.email the host's
// Author, so the agent can commit. It returns the base commit.
//
// WorkDir must be empty and written by nobody else yet: Clone runs git on
// WorkDir's .git, which it has just made.
func (h *Host) Clone(ctx context.Context, r CloneRequest) (string, error) {
	rm, err := h.remote(r.URL)
	if err == nil && r.Ref != "" {
		err = CheckRef(r.Ref)
	}
	if err == nil {
		err = CheckBranch(r.Branch)
	}
	if err != nil {
		return "", err
	}
	if err := h.fetchBare(ctx, rm, r.GitDir); err != nil {
		return "", err
	}
	base, err := h.resolve(ctx, rm, r.GitDir, r.Ref)
	if err != nil {
		return "", err
	}
	// The branch starts at base here as in the checkout, whatever branch
	// of that name the remote has: Commit builds on it, and a push over
	// someone else's branch is refused, never a silent rewrite of theirs.
	for _, ref := range []string{BaseRef, "refs/heads/" + r.Branch} {
		if _, err := h.git(ctx, run{args: []string{"update-ref", ref, base}, gitDir: r.GitDir}); err != nil {
			return "", err
		}
	}
	if err := h.checkout(ctx, r, base); err != nil {
		return "", err
	}
	return base, nil
}

// fetchBare makes gitDir a bare clone of rm, anew.
func (h *Host) fetchBare(ctx context.Context, rm remote, gitDir string) error {
	if err := os.RemoveAll(gitDir); err != nil {
		return fmt.Errorf("git dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(gitDir), 0o700); err != nil {
		return fmt.Errorf("git dir: %w", err)
	}
	args := []string{"clone", "--quiet", "--bare", "--template="}
	if rm.kind == kindLocal && !isFileURL(rm.url) {
		args = append(args, "--no-local") // through upload-pack, as file:// is: no hard links to its objects
	}
	args = append(args, "--", rm.url, gitDir)
	if _, err := h.git(ctx, run{args: args, remote: &rm}); err != nil {
		os.RemoveAll(gitDir)
		return fmt.Errorf("clone %s: %w", Redact(rm.url), err)
	}
	return nil
}

var fileURL = regexp.MustCompile(`^(?i)file://`)

func isFileURL(s string) bool { return fileURL.MatchString(s) }

// hexCommit is a full commit id, sha1 or sha256.
var hexCommit = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// resolve finds ref in gitDir, a branch first, then a tag, then anything
// rev-parse takes; a full commit id the clone lacks is fetched by id
// (servers that allow it). "" is the remote's default branch.
func (h *Host) resolve(ctx context.Context, rm remote, gitDir, ref string) (string, error) {
	candidates := []string{"HEAD"}
	if ref != "" {
		candidates = []string{"refs/heads/" + ref, "refs/tags/" + ref, ref}
	}
	for _, c := range candidates {
		if id, err := h.commitOf(ctx, gitDir, c); err == nil {
			return id, nil
		}
	}
	if hexCommit.MatchString(ref) {
		if _, err := h.git(ctx, run{args: []string{"fetch", "--quiet", "--no-tags", "--", rm.url, ref}, gitDir: gitDir, remote: &rm}); err == nil {
			if id, err := h.commitOf(ctx, gitDir, ref); err == nil {
				return id, nil
			}
		}
	}
	if ref == "" {
		return "", errors.New("clone: the repository has no commits")
	}
	return "", fmt.Errorf("clone %s: ref %q: no such branch, tag or commit", Redact(rm.url), ref)
}

func (h *Host) commitOf(ctx context.Context, gitDir, rev string) (string, error) {
	out, err := h.git(ctx, run{args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", rev + "^{commit}"}, gitDir: gitDir})
	return line(out), err
}

// checkout gives r.WorkDir a .git cloned from the host's git dir (copied
// objects, no template), points its origin at the URL without user
// information, and checks out base on r.Branch.
func (h *Host) checkout(ctx context.Context, r CloneRequest, base string) error {
	if _, err := h.git(ctx, run{args: []string{"clone", "--quiet", "--no-checkout", "--no-hardlinks", "--template=", "--", r.GitDir, r.WorkDir}}); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	dotGit := filepath.Join(r.WorkDir, ".git")
	for _, kv := range [][2]string{{"remote.origin.url", Redact(r.URL)}, {"user.name", h.name}, {"user.email", h.email}} {
		if _, err := h.git(ctx, run{args: []string{"config", "--file", filepath.Join(dotGit, "config"), "--", kv[0], kv[1]}}); err != nil {
			return fmt.Errorf("checkout: %w", err)
		}
	}
	_, err := h.git(ctx, run{args: []string{"--work-tree=" + r.WorkDir, "checkout", "--quiet", "-B", r.Branch, base, "--"}, gitDir: dotGit, dir: r.WorkDir})
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	return nil
}

// Package imagename owns the one spelling of a sandbox image's name that
// agentbox compares and stores. It is a leaf: it imports no other agentbox
// package.
package imagename

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// Normalize returns the one spelling of an image name that agentbox
// compares and stores: "NAME", "NAME:latest" and "docker.io/library/NAME"
// are the same image, "NAME:latest". A name with a digest keeps it.
func Normalize(name string) (string, error) {
	named, err := reference.ParseNormalizedNamed(strings.TrimSpace(name))
	if err != nil {
		return "", fmt.Errorf("image %q: %w", name, err)
	}
	return reference.FamiliarString(reference.TagNameOnly(named)), nil
}

// ParseList reads a list of image names separated by commas, each
// normalized (Normalize), empty items skipped; it reports every bad name.
func ParseList(v string) ([]string, error) {
	var out []string
	var errs []error
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, err := Normalize(item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, name)
	}
	return out, errors.Join(errs...)
}

// Dedupe returns names normalized (a name that does not parse is kept as
// written) and without repeats, in their first order.
func Dedupe(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range names {
		if n, err := Normalize(name); err == nil {
			name = n
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

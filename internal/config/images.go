package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// NormalizeImage returns the one spelling of an image name that agentbox
// compares and stores: "NAME", "NAME:latest" and "docker.io/library/NAME"
// are the same image, "NAME:latest". A name with a digest keeps it.
func NormalizeImage(name string) (string, error) {
	named, err := reference.ParseNormalizedNamed(strings.TrimSpace(name))
	if err != nil {
		return "", fmt.Errorf("image %q: %w", name, err)
	}
	return reference.FamiliarString(reference.TagNameOnly(named)), nil
}

// parseImages reads AGENTBOX_IMAGES: image names separated by commas,
// each normalized (NormalizeImage), empty items skipped.
func parseImages(v string) ([]string, error) {
	var out []string
	var errs []error
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, err := NormalizeImage(item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("AGENTBOX_IMAGES: %w", err)
	}
	return out, nil
}

// AllowedImages returns the images a job may ask for, normalized and
// without repeats: the sandbox image (always allowed) first, then Images.
func (s Sandbox) AllowedImages() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range append([]string{s.Image}, s.Images...) {
		if n, err := NormalizeImage(name); err == nil {
			name = n
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

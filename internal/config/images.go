package config

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/imagename"
)

// parseImages reads AGENTBOX_IMAGES: image names separated by commas,
// each normalized (imagename.Normalize), empty items skipped.
func parseImages(v string) ([]string, error) {
	out, err := imagename.ParseList(v)
	if err != nil {
		return nil, fmt.Errorf("AGENTBOX_IMAGES: %w", err)
	}
	return out, nil
}

// AllowedImages returns the images a job may ask for, normalized and
// without repeats: the sandbox image (always allowed) first, then Images.
func (s Sandbox) AllowedImages() []string {
	return imagename.Dedupe(append([]string{s.Image}, s.Images...))
}

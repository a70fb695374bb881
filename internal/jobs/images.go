package jobs

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/imagename"
)

// ErrImageNotAllowed means a job asked for an image the operator does not
// allow (AGENTBOX_IMAGES); the message names those allowed.
var ErrImageNotAllowed = errors.New("image not allowed")

// CheckImage returns the normalized name (imagename.Normalize) of the
// image a job asks for, "" for none, and refuses one not in allowed,
// naming the images that are.
func CheckImage(name string, allowed []string) (string, error) {
	if name == "" {
		return "", nil
	}
	n, err := imagename.Normalize(name)
	if err != nil {
		return "", fieldError(ErrImageNotAllowed, "image", fmt.Sprintf("%v; allowed images: %s", err, strings.Join(allowed, ", ")))
	}
	if !slices.Contains(allowed, n) {
		return "", fieldError(ErrImageNotAllowed, "image", fmt.Sprintf("image %q is not one the operator allows; allowed images: %s (the operator lists more in AGENTBOX_IMAGES)",
			name, strings.Join(allowed, ", ")))
	}
	return n, nil
}

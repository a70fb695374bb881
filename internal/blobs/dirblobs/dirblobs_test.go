package dirblobs_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/blobstest"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
)

func TestConformance(t *testing.T) {
	blobstest.Run(t, func(t *testing.T) blobs.Store {
		s, err := dirblobs.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

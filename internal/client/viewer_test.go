package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestViewer(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL+"/", apitest.Token)
	ctx := context.Background()
	id := e.Submit("x").ID
	l, err := c.Viewer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.DesktopURL, e.URL+"/v1/jobs/"+id+"/desktop/?ticket=") ||
		!strings.HasPrefix(l.JupyterURL, e.URL+"/v1/jobs/"+id+"/jupyter/?ticket=") || l.ExpiresAt.IsZero() {
		t.Errorf("links %+v", l)
	}
	e.Finish(id, store.StatusComplete, "")
	_, err = c.Viewer(ctx, id)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != wire.CodeNoSandbox {
		t.Errorf("ended job: %v", err)
	}
	if _, err := c.Viewer(ctx, "job_nope"); !client.IsNotFound(err) {
		t.Errorf("unknown job: %v", err)
	}
}

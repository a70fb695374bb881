package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestNetwork(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL, apitest.Token)
	ctx := context.Background()
	j := e.Submit("x")
	e.Emit(j.ID, event.Network{Host: "late.test", Port: 443, Decision: "deny", Reason: "not allowed"})
	late, _ := egress.ParseRule("late.test")
	p, err := c.SetNetwork(ctx, j.ID, egress.Policy{Allow: []egress.Rule{late}})
	if err != nil || p.Mode != "allow" || p.Allow[0].Host != "late.test" {
		t.Fatalf("SetNetwork: %+v, %v", p, err)
	}
	sum, err := c.Network(ctx, j.ID)
	if err != nil || sum.Policy.Mode != "allow" || len(sum.Hosts) != 1 || sum.Hosts[0].Denied != 1 || sum.Connections != 1 {
		t.Errorf("Network: %+v, %v", sum, err)
	}
	var ce *client.Error
	if _, err := c.SetNetwork(ctx, j.ID, egress.Policy{Presets: []string{"ruby"}}); !errors.As(err, &ce) || ce.StatusCode != 400 || ce.Code != wire.CodeBadRequest {
		t.Errorf("unknown preset: %v", err)
	}
}

package ui

import (
	"net/http"

	"github.com/agentbox/agentbox/internal/store"
)

// timelineData is what the job page's timeline panel needs.
func (u *UI) timelineData(_ *http.Request, _ store.Job) (any, error) { return nil, nil }

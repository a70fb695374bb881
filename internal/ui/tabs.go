package ui

import (
	"net/http"

	"github.com/agentbox/agentbox/internal/store"
)

// tabsData is what the job page's tabs (files, diff, desktop, Jupyter) need.
func (u *UI) tabsData(_ *http.Request, _ store.Job) (any, error) { return nil, nil }

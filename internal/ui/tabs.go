package ui

import (
	"net/http"
	"net/url"

	"github.com/agentbox/agentbox/internal/store"
)

// tabs is what the job page's tabs (files, diff, desktop, Jupyter) need.
type tabs struct {
	ID string
	// Ended: the job's workspace and diff can be read, its sandbox (the
	// desktop, Jupyter) is gone.
	Ended bool
	// Deleted: the job's workspace was removed; nothing to show.
	Deleted bool
	Frame   bool // see viewTab
	ZipURL  string
	Views   []viewTab
}

// viewTab is the tab of one of a running job's views.
type viewTab struct {
	Service    string // the viewer link's service: "desktop", "jupyter"
	Tab, Title string
	Ended      bool
	// Frame: the views have origins of their own, so the page frames
	// them; else it opens them in a window of their own (see Config).
	Frame bool
}

// tabsData is what the job page's tabs (files, diff, desktop, Jupyter) need.
func (u *UI) tabsData(r *http.Request, j store.Job) (any, error) {
	t := tabs{
		ID: j.ID, Ended: j.Status.Final(), Frame: u.cfg.FrameSrc != "", Deleted: !j.DeletedAt.IsZero(),
		ZipURL: "/v1/jobs/" + url.PathEscape(j.ID) + "/artifacts.zip",
	}
	for _, v := range []viewTab{{Service: "desktop", Tab: "Desktop", Title: "desktop"}, {Service: "jupyter", Tab: "Jupyter", Title: "Jupyter notebook"}} {
		v.Ended, v.Frame = t.Ended, t.Frame
		t.Views = append(t.Views, v)
	}
	return t, nil
}

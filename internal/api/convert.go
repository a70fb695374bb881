package api

import (
	"cmp"
	"encoding/json"
	"math"
	"net/url"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// submitRequest turns the wire request into the service's.
func submitRequest(in wire.SubmitRequest, key string) jobs.SubmitRequest {
	req := jobs.SubmitRequest{Task: in.Task, Model: in.Model, Metadata: in.Metadata, IdempotencyKey: key,
		Image: in.Image, WorkspaceFrom: in.WorkspaceFrom, Isolation: in.Isolation}
	if in.Network != nil {
		req.Network = *in.Network
	}
	if r := in.Repo; r != nil {
		req.Repo = &store.Repo{URL: r.URL, Ref: r.Ref, Branch: r.Branch, Push: r.Push}
		if pr := r.PullRequest; pr != nil {
			req.Repo.PullRequest = &store.PullRequest{Title: pr.Title, Body: pr.Body, Draft: pr.Draft}
		}
	}
	if in.Limits != nil {
		req.Limits = store.Limits{
			Timeout:       time.Duration(in.Limits.Timeout),
			MaxSteps:      in.Limits.MaxSteps,
			MemoryBytes:   int64(in.Limits.Memory),
			NanoCPUs:      nanoCPUs(in.Limits.CPUs),
			DiskBytes:     int64(in.Limits.Disk),
			ContextWindow: in.Limits.ContextWindow,
			EgressBytes:   int64(in.Limits.Egress),
		}
	}
	return req
}

// nanoCPUs converts a CPU count, saturating so that absurd values stay
// absurd (and are refused by validation) instead of wrapping around.
func nanoCPUs(cpus float64) int64 {
	switch {
	case cpus >= float64(math.MaxInt64)/1e9:
		return math.MaxInt64
	case cpus <= -float64(math.MaxInt64)/1e9:
		return math.MinInt64
	}
	return int64(math.Round(cpus * 1e9))
}

func limitsDTO(l store.Limits) wire.Limits {
	return wire.Limits{
		Timeout:       wire.Duration(l.Timeout),
		MaxSteps:      l.MaxSteps,
		Memory:        wire.ByteSize(l.MemoryBytes),
		CPUs:          float64(l.NanoCPUs) / 1e9,
		Disk:          wire.ByteSize(l.DiskBytes),
		ContextWindow: l.ContextWindow,
		Egress:        wire.ByteSize(l.EgressBytes),
	}
}

func (s *server) jobDTO(j store.Job) wire.Job {
	return wire.Job{
		JobID: j.ID, Task: j.Task, Model: j.Model, Status: string(j.Status),
		Limits: limitsDTO(j.Limits), Metadata: j.Metadata,
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, Steps: j.Steps,
		Usage:         wire.Usage(j.Usage),
		ContextTokens: j.ContextTokens, Error: j.Error, Result: j.Result,
		CancelRequested: j.CancelRequested,
		CreatedAt:       utc(j.CreatedAt), UpdatedAt: utc(j.UpdatedAt),
		StartedAt: utc(j.StartedAt), EndedAt: utc(j.EndedAt), DeletedAt: utc(j.DeletedAt),
		Image: j.Image, WorkspaceFrom: j.WorkspaceFrom, Repo: repoDTO(j.Repo), Git: gitDTO(j.Git),
		Turn: max(j.Turn, 1), Worker: runningOn(j), Links: s.links(j.ID),
		Isolation: cmp.Or(j.Isolation, sandbox.IsolationContainer),
		Network:   jobs.JobNetwork(j),
		Effective: s.effective(j),
	}
}

// effective is the model and limits job j runs with under the server's
// defaults; nil when the server states none.
func (s *server) effective(j store.Job) *wire.Effective {
	if s.cfg.Defaults == nil {
		return nil
	}
	e := s.cfg.Defaults.For(j.Model, limitsDTO(j.Limits))
	return &e
}

// runningOn is the worker running j, empty unless it is running.
func runningOn(j store.Job) string {
	if j.Status != store.StatusRunning {
		return ""
	}
	return j.LeaseOwner
}

func workerDTO(w jobs.WorkerStatus) wire.Worker {
	return wire.Worker{WorkerID: w.ID, Address: w.Address, Capacity: w.Capacity, Running: w.Running,
		StartedAt: utc(w.StartedAt), HeartbeatAt: utc(w.HeartbeatAt), Alive: w.Alive}
}

func repoDTO(r *store.Repo) *wire.Repo {
	if r == nil {
		return nil
	}
	out := &wire.Repo{URL: r.URL, Ref: r.Ref, Branch: r.Branch, Push: r.Push}
	if pr := r.PullRequest; pr != nil {
		out.PullRequest = &wire.PullRequest{Title: pr.Title, Body: pr.Body, Draft: pr.Draft}
	}
	return out
}

func gitDTO(g store.Git) *wire.Git {
	if g == (store.Git{}) {
		return nil
	}
	out := wire.Git(g)
	return &out
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func (s *server) links(id string) wire.Links {
	self := s.cfg.BaseURL + "/v1/jobs/" + url.PathEscape(id)
	return wire.Links{Self: self, Events: self + "/events", Artifacts: self + "/artifacts.zip", Files: self + "/files/",
		Diff: self + "/diff", Messages: self + "/messages"}
}

func networkDTO(n jobs.NetworkSummary) wire.NetworkSummary {
	out := wire.NetworkSummary{Policy: n.Policy, Hosts: make([]wire.NetworkHost, 0, len(n.Hosts)), Connections: n.Connections, Truncated: n.Truncated}
	for _, h := range n.Hosts {
		out.Hosts = append(out.Hosts, wire.NetworkHost{Host: h.Host, Port: h.Port, Allowed: h.Allowed, Denied: h.Denied,
			BytesIn: h.BytesIn, BytesOut: h.BytesOut, LastDecision: h.LastDecision, LastReason: h.LastReason})
	}
	return out
}

func eventDTO(e store.Event) wire.Event {
	p := e.Payload
	if len(p) == 0 || !json.Valid(p) {
		p = json.RawMessage("{}")
	}
	return wire.Event{JobID: e.JobID, Seq: e.Seq, Time: utc(e.Time), Type: e.Type, Payload: p}
}

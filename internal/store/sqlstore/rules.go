package sqlstore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// Page sizes of ListJobs, EndedBefore and Events.
const (
	DefaultListLimit   = 50
	MaxListLimit       = 1000
	DefaultEventsLimit = 1000
	MaxEventsLimit     = 10000
)

// ErrBadCursor means a ListOptions.Cursor was not made by ListJobs.
var ErrBadCursor = fmt.Errorf("%w: bad cursor", store.ErrInvalid)

// PrepareNew fills CreateJob's defaults: an empty Status becomes pending,
// a zero CreatedAt now, a zero UpdatedAt CreatedAt.
func PrepareNew(j *store.Job) {
	if j.Status == "" {
		j.Status = store.StatusPending
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = Now()
	}
	if j.UpdatedAt.IsZero() {
		j.UpdatedAt = j.CreatedAt
	}
	Normalize(j)
}

// Replay decides a create whose idempotency key exists: the same request
// (hash) gets the stored job, another one ErrConflict.
func Replay(old store.Job, hash string) error {
	if old.RequestHash != hash {
		return fmt.Errorf("idempotency key %q was used by another request: %w", old.IdempotencyKey, store.ErrConflict)
	}
	return nil
}

// Updated is next as UpdateJob saves it: the fields fn may not change
// taken back from old, UpdatedAt now.
func Updated(old, next store.Job) store.Job {
	next.ID, next.CreatedAt, next.IdempotencyKey, next.RequestHash, next.Task =
		old.ID, old.CreatedAt, old.IdempotencyKey, old.RequestHash, old.Task
	next.UpdatedAt = Now()
	return next
}

// Claim makes j running under owner's lease until now+lease.
func Claim(j *store.Job, owner string, lease time.Duration) {
	t := Now()
	j.Status, j.Attempts = store.StatusRunning, j.Attempts+1
	if j.StartedAt.IsZero() {
		j.StartedAt = t
	}
	j.LeaseOwner, j.LeaseUntil, j.UpdatedAt = owner, t.Add(lease), t
}

// Extend extends j's lease to now+lease.
func Extend(j *store.Job, lease time.Duration) {
	t := Now()
	j.LeaseUntil, j.UpdatedAt = t.Add(lease), t
}

// Release gives j back: pending, not counting the run, or canceled if a
// cancel was requested.
func Release(j *store.Job) {
	t := Now()
	j.Status, j.Attempts = store.StatusPending, max(0, j.Attempts-1)
	if j.CancelRequested {
		j.Status, j.Error, j.EndedAt = store.StatusCanceled, "canceled by request", t
	}
	j.LeaseOwner, j.LeaseUntil, j.UpdatedAt = "", time.Time{}, t
}

// Requeue ends a lease that expired at now.
func Requeue(j *store.Job, now time.Time) {
	switch {
	case j.CancelRequested:
		j.Status, j.EndedAt, j.Error = store.StatusCanceled, now, "canceled by request"
	case j.Attempts >= j.MaxAttempts:
		j.Status, j.EndedAt = store.StatusError, now
		j.Error = fmt.Sprintf("lease expired after %d attempts (worker died or lost contact)", j.Attempts)
	default:
		j.Status = store.StatusPending
	}
	j.LeaseOwner, j.LeaseUntil, j.UpdatedAt = "", time.Time{}, now
}

// NewEvent is entry e of job jobID's log as it will be stored, before its
// Seq is known; a payload that is not JSON is an error.
func NewEvent(jobID string, e store.Entry) (store.Event, error) {
	if len(e.Payload) > 0 && !json.Valid(e.Payload) {
		return store.Event{}, fmt.Errorf("payload of a %s event is not valid JSON", e.Type)
	}
	ev := store.Event{JobID: jobID, Time: Now(), Type: e.Type}
	if len(e.Payload) > 0 {
		ev.Payload = append(json.RawMessage(nil), e.Payload...)
	}
	return ev, nil
}

// Payload is an event's payload as stored: NULL when empty.
func Payload(p json.RawMessage) any {
	if len(p) == 0 {
		return nil
	}
	return string(p)
}

// ListLimit is the page size of opts.
func ListLimit(opts store.ListOptions) int {
	if opts.Limit <= 0 {
		return DefaultListLimit
	}
	return min(opts.Limit, MaxListLimit)
}

// LikePattern is a LIKE pattern (escape character \) matching text that
// contains q literally.
func LikePattern(q string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(q) + "%"
}

// EncodeCursor is the cursor of a page whose last job is j.
func EncodeCursor(j store.Job) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(Nanos(j.CreatedAt), 10) + ":" + j.ID))
}

// DecodeCursor returns the created_at and id a cursor holds.
func DecodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", fmt.Errorf("%w %q", ErrBadCursor, c)
	}
	num, id, ok := strings.Cut(string(b), ":")
	created, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return 0, "", fmt.Errorf("%w %q", ErrBadCursor, c)
	}
	return created, id, nil
}

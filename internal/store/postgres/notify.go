package postgres

// Notifications. The triggers of migrations/0002_notify.sql NOTIFY the
// channel "agentbox" when a job becomes pending (payload "p:<job id>") and
// when an event is appended ("e:<job id>:<seq>"). A Notifier LISTENs on one
// dedicated connection of its own (never a pooled one: a pool would hand
// the session, and its LISTEN, to someone else) and fans the notes out to
// its subscribers.
//
// A broken connection is reconnected by the Notifier with backoff; the
// channels of the subscribers of the broken one are closed, so they learn
// that notes may have been missed (and re-read the store) and subscribe
// again. Subscribe waits until the listener is up, so a subscriber never
// holds a channel that silently gets nothing.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store"
)

// notifyChannel is the channel the triggers NOTIFY and the Notifier LISTENs on.
const notifyChannel = "agentbox"

// Tuning of the listener.
const (
	noteBuffer     = 256              // notes a subscriber may fall behind by before some are dropped
	connectTimeout = 10 * time.Second // to connect and LISTEN
	idleCheck      = 15 * time.Second // a quiet connection is pinged this often, to find a dead server
	pingTimeout    = 5 * time.Second
	minBackoff     = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
)

// errClosed is returned by Subscribe once the Notifier is closed.
var errClosed = errors.New("notifier closed")

// Notifier implements store.Notifier over LISTEN/NOTIFY. It starts
// listening on the first Subscribe and stops on Close.
type Notifier struct {
	url  string
	log  *slog.Logger
	ctx  context.Context // the Notifier's life; Close cancels it
	stop context.CancelFunc
	once sync.Once     // starts run
	done chan struct{} // closed when run has returned

	mu    sync.Mutex
	up    bool                            // listening now
	ready chan struct{}                   // closed when the listener comes up
	pid   uint32                          // the listening session's backend pid
	subs  map[chan store.Note]func() bool // each subscriber's stop of its context.AfterFunc
}

// NewNotifier returns a Notifier for the database at url (a pgx connection
// string); log may be nil.
func NewNotifier(url string, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Notifier{url: url, log: log, ctx: ctx, stop: stop, done: make(chan struct{}),
		ready: make(chan struct{}), subs: map[chan store.Note]func() bool{}}
}

// Subscribe delivers notes until ctx ends or the connection breaks, then
// closes the channel. It waits until the Notifier is listening, so no note
// committed after it returns is missed, except by a reader too slow to
// keep up (its channel holds noteBuffer notes; more are dropped).
func (n *Notifier) Subscribe(ctx context.Context) (<-chan store.Note, error) {
	n.once.Do(func() { go n.run() })
	for {
		n.mu.Lock()
		if n.up {
			ch := make(chan store.Note, noteBuffer)
			n.subs[ch] = context.AfterFunc(ctx, func() { n.drop(ch) })
			n.mu.Unlock()
			return ch, nil
		}
		ready := n.ready
		n.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("subscribe: %w", context.Cause(ctx))
		case <-n.ctx.Done():
			return nil, fmt.Errorf("subscribe: %w", errClosed)
		}
	}
}

// Close stops listening and closes every subscriber's channel.
func (n *Notifier) Close() error {
	n.stop()
	n.once.Do(func() { close(n.done) }) // never started
	<-n.done
	return nil
}

// drop closes a subscriber's channel, once.
func (n *Notifier) drop(ch chan store.Note) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropLocked(ch)
}

func (n *Notifier) dropLocked(ch chan store.Note) {
	if stop, ok := n.subs[ch]; ok {
		stop()
		delete(n.subs, ch)
		close(ch)
	}
}

// run listens, and listens again with backoff when the connection breaks,
// until Close.
func (n *Notifier) run() {
	defer close(n.done)
	wait := minBackoff
	for {
		lasted, err := n.listen()
		n.setDown()
		if n.ctx.Err() != nil {
			return
		}
		if lasted > maxBackoff {
			wait = minBackoff
		}
		n.log.Warn("postgres notifications: listener lost; reconnecting", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-n.ctx.Done():
			return
		}
		wait = min(2*wait, maxBackoff)
	}
}

// listen connects, LISTENs and delivers notifications until the
// connection breaks or the Notifier closes; lasted is how long it was up.
func (n *Notifier) listen() (lasted time.Duration, err error) {
	conn, err := n.connect()
	if err != nil {
		return 0, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	began := time.Now()
	n.setUp(conn.PgConn().PID())
	err = n.receive(conn)
	return time.Since(began), err
}

func (n *Notifier) connect() (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(n.url)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "agentbox-notify"
	}
	ctx, cancel := context.WithTimeout(n.ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listen: %w", err)
	}
	return conn, nil
}

// receive delivers notifications until the connection breaks or the
// Notifier closes. A connection quiet for idleCheck is pinged: a server
// that vanished without closing the connection would otherwise never be
// noticed.
func (n *Notifier) receive(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(n.ctx, idleCheck)
		msg, err := conn.WaitForNotification(ctx)
		quiet := ctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			n.deliver(msg.Payload)
		case n.ctx.Err() != nil:
			return n.ctx.Err()
		case !quiet:
			return fmt.Errorf("wait for notification: %w", err)
		default:
			if err := ping(n.ctx, conn); err != nil {
				return err
			}
		}
	}
}

func ping(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

func (n *Notifier) setUp(pid uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.up, n.pid = true, pid
	close(n.ready)
}

// setDown marks the listener down and closes every subscriber's channel:
// notes may be missed until it is up again.
func (n *Notifier) setDown() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.up {
		n.up, n.pid, n.ready = false, 0, make(chan struct{})
	}
	for ch := range n.subs {
		n.dropLocked(ch)
	}
}

// deliver hands a notification to every subscriber that has room.
func (n *Notifier) deliver(payload string) {
	note, ok := parseNote(payload)
	if !ok {
		n.log.Warn("postgres notifications: malformed payload", "payload", payload)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- note:
		default: // a slow reader misses a hint, never blocks the others
		}
	}
}

// parseNote reads a trigger's payload: "p:<job id>" or "e:<job id>:<seq>".
func parseNote(payload string) (store.Note, bool) {
	kind, rest, _ := strings.Cut(payload, ":")
	switch kind {
	case "p":
		return store.Note{Kind: store.NotePending, JobID: rest}, rest != ""
	case "e":
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			return store.Note{}, false
		}
		seq, err := strconv.ParseInt(rest[i+1:], 10, 64)
		return store.Note{Kind: store.NoteEvent, JobID: rest[:i], Seq: seq}, err == nil
	}
	return store.Note{}, false
}

// listenerPID returns the backend pid of the listening session, 0 while down.
func (n *Notifier) listenerPID() uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

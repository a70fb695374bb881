package postgres

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
)

// noteWithin is how soon a note must reach every listener (issue 14).
const noteWithin = 100 * time.Millisecond

func TestParseNote(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    store.Note
		ok      bool
	}{
		{"p:job_1", store.Note{Kind: store.NotePending, JobID: "job_1"}, true},
		{"e:job_1:42", store.Note{Kind: store.NoteEvent, JobID: "job_1", Seq: 42}, true},
		{"e:a:b:7", store.Note{Kind: store.NoteEvent, JobID: "a:b", Seq: 7}, true},
		{"p:", store.Note{}, false},
		{"e:job_1", store.Note{}, false},
		{"e:job_1:x", store.Note{}, false},
		{"x:job_1", store.Note{}, false},
		{"", store.Note{}, false},
	} {
		got, ok := parseNote(c.payload)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseNote(%q) = %+v, %v; want %+v, %v", c.payload, got, ok, c.want, c.ok)
		}
	}
}

// notifyDB is a database with the columns the triggers read (the real
// tables come from 0001_init.sql) and the triggers of 0002_notify.sql.
func notifyDB(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := testenv.Postgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	triggers, err := os.ReadFile("migrations/0002_notify.sql")
	if err != nil {
		t.Fatal(err)
	}
	schema := `CREATE TABLE jobs (id TEXT PRIMARY KEY, status TEXT NOT NULL);
		CREATE TABLE events (job_id TEXT NOT NULL REFERENCES jobs (id), seq BIGINT NOT NULL, PRIMARY KEY (job_id, seq));`
	if _, err := conn.Exec(ctx, schema+string(triggers)); err != nil {
		t.Fatal(err)
	}
	return url, conn
}

// listener is a Notifier and one subscription to it.
type listener struct {
	n     *Notifier
	notes <-chan store.Note
}

func newListener(t *testing.T, url string) *listener {
	t.Helper()
	n := NewNotifier(url, nil)
	t.Cleanup(func() { n.Close() })
	l := &listener{n: n}
	l.subscribe(t)
	return l
}

func (l *listener) subscribe(t *testing.T) {
	t.Helper()
	notes, err := l.n.Subscribe(context.Background()) // ends with Close
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	l.notes = notes
}

// expect waits for the next note, which must be want, and returns how
// long after since it came.
func (l *listener) expect(t *testing.T, want store.Note, since time.Time) time.Duration {
	t.Helper()
	select {
	case got, ok := <-l.notes:
		lat := time.Since(since)
		if !ok {
			t.Fatalf("subscription closed; want %+v", want)
		}
		if got != want {
			t.Fatalf("note %+v; want %+v", got, want)
		}
		return lat
	case <-time.After(10 * time.Second):
		t.Fatalf("no note in 10s; want %+v", want)
	}
	return 0
}

// TestNotesReachEveryListener: two processes' Notifiers on one database
// get each job that becomes pending and each event, within 100 ms, and
// nothing else.
func TestNotesReachEveryListener(t *testing.T) {
	url, db := notifyDB(t)
	a, b := newListener(t, url), newListener(t, url)
	steps := []struct {
		sql  string
		want store.Note
	}{
		{`INSERT INTO jobs VALUES ('r', 'running')`, store.Note{}}, // no note
		{`INSERT INTO jobs VALUES ('j1', 'pending')`, store.Note{Kind: store.NotePending, JobID: "j1"}},
		{`UPDATE jobs SET status = 'pending' WHERE id = 'j1'`, store.Note{}}, // already pending
		{`UPDATE jobs SET status = 'pending' WHERE id = 'r'`, store.Note{Kind: store.NotePending, JobID: "r"}},
		{`INSERT INTO events VALUES ('j1', 1)`, store.Note{Kind: store.NoteEvent, JobID: "j1", Seq: 1}},
		{`INSERT INTO events VALUES ('j1', 2), ('r', 1)`, store.Note{Kind: store.NoteEvent, JobID: "j1", Seq: 2}},
		{``, store.Note{Kind: store.NoteEvent, JobID: "r", Seq: 1}}, // the same statement's second row
	}
	var worst time.Duration
	for _, s := range steps {
		began := time.Now()
		if s.sql != "" {
			if _, err := db.Exec(context.Background(), s.sql); err != nil {
				t.Fatalf("%s: %v", s.sql, err)
			}
		}
		if s.want == (store.Note{}) {
			continue // a missing note shows as the next step's note being wrong
		}
		for _, l := range []*listener{a, b} {
			lat := l.expect(t, s.want, began)
			worst = max(worst, lat)
			t.Logf("%-50s -> %+v in %v", s.sql, s.want, lat)
		}
	}
	if worst > noteWithin {
		t.Errorf("slowest note took %v; want at most %v", worst, noteWithin)
	}
}

// TestListenerRecovers: when the listening session is killed, the
// subscriber's channel closes, and a new subscription gets notes again.
func TestListenerRecovers(t *testing.T) {
	url, db := notifyDB(t)
	a, b := newListener(t, url), newListener(t, url)
	ctx := context.Background()
	pid := a.n.listenerPID()
	killed := time.Now()
	if _, err := db.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-a.notes:
		if ok {
			t.Fatal("a note before the close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription of a killed listener stayed open")
	}
	a.subscribe(t)
	t.Logf("listener back %v after pg_terminate_backend", time.Since(killed))
	if now := a.n.listenerPID(); now == 0 || now == pid {
		t.Fatalf("listener pid %d after the kill of %d", now, pid)
	}
	began := time.Now()
	if _, err := db.Exec(ctx, `INSERT INTO jobs VALUES ('j', 'pending')`); err != nil {
		t.Fatal(err)
	}
	want := store.Note{Kind: store.NotePending, JobID: "j"}
	for _, l := range []*listener{a, b} { // b never noticed
		if lat := l.expect(t, want, began); lat > noteWithin {
			t.Errorf("note after the reconnect took %v; want at most %v", lat, noteWithin)
		}
	}
}

// TestSubscriptionEndsWithContext: a subscriber's channel closes when its
// context ends, and Close ends the others.
func TestSubscriptionEndsWithContext(t *testing.T) {
	url, _ := notifyDB(t)
	n := NewNotifier(url, nil)
	ctx, cancel := context.WithCancel(context.Background())
	short, err := n.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long, err := n.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range short { // until closed
	}
	n.Close()
	for range long {
	}
	if _, err := n.Subscribe(context.Background()); err == nil {
		t.Fatal("Subscribe after Close succeeded")
	}
}

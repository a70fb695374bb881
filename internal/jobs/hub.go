package jobs

import "sync"

// hub wakes the followers of a job's event log when events are appended in
// this process, or in another one whose notes the store passes on
// (followNotes). Followers re-read the store; a missed wake costs one poll.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newHub() *hub { return &hub{subs: map[string]map[chan struct{}]struct{}{}} }

func (h *hub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}

// notify wakes the followers of job id.
func (h *hub) notify(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	poke(h.subs[id])
}

// notifyAll wakes every follower, after events may have gone unannounced.
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		poke(subs)
	}
}

func poke(subs map[chan struct{}]struct{}) {
	for ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

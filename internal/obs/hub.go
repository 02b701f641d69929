package obs

import (
	"net/http"
	"sync"
	"time"
)

// hub fans JSON messages out to Server-Sent-Events subscribers and keeps
// a bounded history that every new subscriber is sent first, so that a
// dashboard attaching late still sees the job from its start (up to the
// bound). Sticky messages (a rank's info) are kept by key outside the
// bound and replayed before the history.
type hub struct {
	mu     sync.Mutex
	sticky map[string][]byte
	keys   []string // sticky keys in first-seen order
	hist   [][]byte
	limit  int
	subs   map[*subscriber]struct{}
	closed bool
}

// subscriber is one SSE connection; its channel is closed when it falls
// behind (the client reconnects and is replayed the history) or the hub
// closes.
type subscriber struct{ ch chan []byte }

func newHub(limit int) *hub {
	return &hub{sticky: map[string][]byte{}, limit: limit, subs: map[*subscriber]struct{}{}}
}

// publish sends msg to every subscriber and keeps it: under key when key
// is not empty (replacing the previous one), else in the history.
func (h *hub) publish(msg []byte, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if key != "" {
		if _, ok := h.sticky[key]; !ok {
			h.keys = append(h.keys, key)
		}
		h.sticky[key] = msg
	} else {
		if len(h.hist) >= h.limit {
			n := copy(h.hist, h.hist[len(h.hist)/4:]) // drop the oldest quarter at once
			clear(h.hist[n:])
			h.hist = h.hist[:n]
		}
		h.hist = append(h.hist, msg)
	}
	for s := range h.subs {
		select {
		case s.ch <- msg:
		default:
			close(s.ch)
			delete(h.subs, s)
		}
	}
}

// subscribe returns a new subscriber and the messages to replay to it.
func (h *hub) subscribe() (*subscriber, [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &subscriber{ch: make(chan []byte, 1024)}
	if h.closed {
		close(s.ch)
		return s, nil
	}
	replay := make([][]byte, 0, len(h.keys)+len(h.hist))
	for _, k := range h.keys {
		replay = append(replay, h.sticky[k])
	}
	replay = append(replay, h.hist...)
	h.subs[s] = struct{}{}
	return s, replay
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

// close ends every subscription; later publishes are dropped.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		close(s.ch)
		delete(h.subs, s)
	}
}

// keepAlive is how often an idle SSE stream gets a comment line, so that
// proxies and the browser keep it open.
const keepAlive = 15 * time.Second

// serveSSE streams h to one HTTP client as Server-Sent Events: the replay,
// then every message, each as one "data:" line.
func serveSSE(w http.ResponseWriter, r *http.Request, h *hub) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	s, replay := h.subscribe()
	defer h.unsubscribe(s)
	write := func(msg []byte) bool {
		if _, err := w.Write([]byte("data: ")); err != nil {
			return false
		}
		if _, err := w.Write(msg); err != nil {
			return false
		}
		_, err := w.Write([]byte("\n\n"))
		return err == nil
	}
	w.Write([]byte("retry: 1000\n\n"))
	for _, m := range replay {
		if !write(m) {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-s.ch:
			if !ok {
				return
			}
			if !write(m) {
				return
			}
			for more := true; more; { // batch what is queued into one flush
				select {
				case m, ok := <-s.ch:
					if !ok || !write(m) {
						return
					}
				default:
					more = false
				}
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

package admit

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestPendingSetEvictsOldestOfSourceThenOldestOverall(t *testing.T) {
	p := newPendingSet(4, 2)
	a1, ev, _ := p.add("a", "a1")
	if ev != nil {
		t.Fatal("evicted with room")
	}
	p.add("a", "a2")
	_, ev, why := p.add("a", "a3") // source a is full: a1 goes
	if ev != a1 || why != evictSourceFull {
		t.Fatalf("evicted %v (%s), want a1 for the source limit", ev, why)
	}
	if p.remove(a1) {
		t.Fatal("removed an evicted entry twice")
	}
	b1, _, _ := p.add("b", "b1")
	p.add("c", "c1") // 4 pending: a2 a3 b1 c1
	_, ev, why = p.add("d", "d1")
	if ev == nil || ev.value != "a2" || why != evictGateFull {
		t.Fatalf("evicted %v (%s), want a2 (oldest of all) for the gate limit", ev, why)
	}
	if !p.remove(b1) || p.remove(b1) {
		t.Fatal("remove is not exactly-once")
	}
	if p.len() != 3 || p.sources() != 3 {
		t.Fatalf("%d pending from %d sources, want 3 from 3 (a3 c1 d1)", p.len(), p.sources())
	}
}

// fakeConn is a net.Conn with a chosen remote address that records Close.
type fakeConn struct {
	net.Conn
	remote net.Addr
	once   sync.Once
	closed chan struct{}
}

func newFakeConn(ip string, port int) *fakeConn {
	return &fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: port}, closed: make(chan struct{})}
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.once.Do(func() { close(c.closed) }); return nil }
func (c *fakeConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// A flood from one source never holds more than the limits, the newest
// connections are the ones pending, and every refusal is counted while
// only a few are written.
func TestGateBoundsAFlood(t *testing.T) {
	var logs bytes.Buffer
	g, err := New(Config{Name: "test", MaxPending: 8, MaxPendingPerSource: 4, Deadline: time.Hour, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	var conns []*fakeConn
	for i := range 1000 {
		c := newFakeConn(fmt.Sprintf("10.0.0.%d", 1+i%3), 1000+i)
		conns = append(conns, c)
		g.Admit(c)
		if s := g.Stats(); s.Pending > 8 {
			t.Fatalf("after %d: %d pending", i+1, s.Pending)
		}
	}
	open := 0
	for i, c := range conns {
		if !c.isClosed() {
			open++
			if i < len(conns)-8 {
				t.Fatalf("connection %d of %d still open: the oldest must go first", i, len(conns))
			}
		}
	}
	s := g.Stats()
	if open != 8 || s.Pending != 8 || s.Evicted != 992 || s.Refused != 992 {
		t.Fatalf("%d open, stats %+v; want 8 pending and 992 evictions, each refusal counted", open, s)
	}
	if n := strings.Count(logs.String(), "\n"); n == 0 || n > 10 {
		t.Fatalf("%d refusal lines written for 992 refusals, want a few", n)
	}
	g.Flush()
	if !strings.Contains(logs.String(), `"suppressed":`) {
		t.Fatalf("no count of the suppressed refusals: %s", logs.String())
	}
}

// Another source's flood does not touch a source under its limit (unless
// the whole gate is full).
func TestGateSourceLimitSparesOtherSources(t *testing.T) {
	g, err := New(Config{MaxPending: 100, MaxPendingPerSource: 2, Deadline: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	real := newFakeConn("10.0.0.9", 1)
	g.Admit(real)
	for i := range 50 {
		g.Admit(newFakeConn("10.6.6.6", 1000+i))
	}
	if real.isClosed() {
		t.Fatal("a flood from another source closed a pending connection")
	}
	if s := g.Stats(); s.Pending != 3 || s.Sources != 2 {
		t.Fatalf("stats %+v, want 3 pending from 2 sources", s)
	}
}

// Authenticated takes a connection out of the gate (a flood can no longer
// evict it); a connection the gate closed cannot authenticate.
func TestGateAuthenticatedLeavesTheGate(t *testing.T) {
	g, err := New(Config{MaxPending: 2, MaxPendingPerSource: 2, Deadline: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	worker := newFakeConn("10.0.0.1", 1)
	victim := newFakeConn("10.0.0.1", 2)
	pw := g.Admit(worker)
	pv := g.Admit(victim)
	if !pw.Authenticated() {
		t.Fatal("a pending connection could not authenticate")
	}
	for i := range 10 {
		g.Admit(newFakeConn("10.0.0.1", 100+i))
	}
	if worker.isClosed() {
		t.Fatal("an authenticated connection was evicted")
	}
	if !victim.isClosed() || pv.Authenticated() {
		t.Fatal("an evicted connection was not closed, or could still authenticate")
	}
	pw.Release() // no-op after Authenticated
	if s := g.Stats(); s.Pending != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A connection that does not authenticate in time is closed and its place
// freed; Release frees a place without closing.
func TestGateDeadlineAndRelease(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	g, err := New(Config{MaxPending: 4, Deadline: time.Millisecond, Logger: zerolog.New(lockedWriter{&mu, &logs})})
	if err != nil {
		t.Fatal(err)
	}
	c := newFakeConn("10.0.0.1", 1)
	g.Admit(c)
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a silent connection outlived its deadline")
	}
	if s := g.Stats(); s.Pending != 0 || s.Expired != 1 { // the place is freed before the close
		t.Fatalf("stats %+v", s)
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "not authenticated within") {
		t.Errorf("expiry not logged: %s", logs.String())
	}
	mu.Unlock()

	g2, _ := New(Config{Deadline: time.Hour, Logger: zerolog.Nop()})
	d := newFakeConn("10.0.0.1", 2)
	p := g2.Admit(d)
	p.Release()
	p.Release()
	if d.isClosed() || g2.Stats().Pending != 0 || p.Authenticated() {
		t.Fatal("Release must free the place without closing, once")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{MaxPending: -1}); err == nil {
		t.Fatal("negative limit accepted")
	}
	if _, err := New(Config{Deadline: -time.Second}); err == nil {
		t.Fatal("negative deadline accepted")
	}
}

func TestSource(t *testing.T) {
	if s := Source(&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9}); s != "10.1.2.3" {
		t.Fatal(s)
	}
	if s := Source(&net.UnixAddr{Name: "/tmp/x", Net: "unix"}); s != "/tmp/x" {
		t.Fatal(s)
	}
}

// Pass.Refuse frees the place and logs once; a connection the gate
// already closed is not logged again.
func TestPassRefuse(t *testing.T) {
	g, err := New(Config{MaxPending: 1, Deadline: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := g.Admit(newFakeConn("10.0.0.1", 1))
	r := g.Admit(newFakeConn("10.0.0.2", 1)) // evicts p: one refusal
	p.Refuse("bad handshake", nil)           // already counted
	r.Refuse("wrong secret", nil)
	r.Refuse("wrong secret", nil) // once only
	if s := g.Stats(); s.Refused != 2 || s.Pending != 0 {
		t.Fatalf("stats %+v, want 2 refusals and nothing pending", s)
	}
}

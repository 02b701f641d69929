package elastic

import (
	"bytes"
	"sync"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/view"
)

// eventKind classifies what memberlist tells the loop.
type eventKind uint8

const (
	evAlive eventKind = iota + 1 // a node joined or was updated
	evDead                       // a node was declared dead or left
	evMsg                        // a user message (proposal, failure report)
	evState                      // a push/pull state exchange (the peer's view)
)

type event struct {
	kind eventKind
	name string
	addr string // the node's memberlist host:port (evAlive, evDead)
	data []byte
}

// mailbox is an unbounded queue from memberlist's goroutines to the loop:
// memberlist calls its delegates with its own locks held, so they must
// never block, and dropping a membership event is not an option.
type mailbox struct {
	mu     sync.Mutex
	q      []event
	signal chan struct{} // capacity 1: "the queue is not empty"
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (m *mailbox) put(e event) {
	m.mu.Lock()
	m.q = append(m.q, e)
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *mailbox) take() []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.q
	m.q = nil
	return q
}

// published is the adopted view as the loop last published it, for
// memberlist's LocalState callback (which runs on memberlist's goroutines).
type published struct {
	mu sync.Mutex
	b  []byte
}

func (p *published) set(v view.View) {
	b := encode(msgProposal, v)
	p.mu.Lock()
	p.b = b
	p.mu.Unlock()
}

func (p *published) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b
}

// delegate adapts memberlist's callbacks to the mailbox.
//
// memberlist hands its event callbacks a *memberlist.Node that points into
// its own state, which it mutates under its node lock; the callbacks run
// with that lock held, so they are the only place ringtail reads a Node:
// they copy the name and address into the event. Nothing else in this
// package calls Members or LocalNode (TestNoMemberlistNodeReads).
type delegate struct {
	self  string // this node's name
	box   *mailbox
	state *published

	mu       sync.Mutex
	selfAddr string // guarded by mu: this node's host:port, from its own join
}

func newDelegate(self string, box *mailbox, state *published) *delegate {
	return &delegate{self: self, box: box, state: state}
}

// localAddr returns this node's memberlist host:port as memberlist
// announced it (memberlist.Create announces the local node synchronously,
// so it is set once Create has returned).
func (d *delegate) localAddr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.selfAddr
}

// nodeEvent copies what the loop needs from n while memberlist holds its
// lock, and queues it.
func (d *delegate) nodeEvent(kind eventKind, n *memberlist.Node) {
	e := event{kind: kind, name: n.Name, addr: n.Address()}
	if e.name == d.self && kind == evAlive {
		d.mu.Lock()
		d.selfAddr = e.addr
		d.mu.Unlock()
	}
	d.box.put(e)
}

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate: no metadata.
func (d *delegate) NodeMeta(limit int) []byte { return nil }

// GetBroadcasts implements memberlist.Delegate: views travel by direct
// sends and push/pull, not piggybacked gossip.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// NotifyMsg implements memberlist.Delegate: a proposal or failure report
// for the loop.
func (d *delegate) NotifyMsg(b []byte) {
	d.box.put(event{kind: evMsg, data: bytes.Clone(b)})
}

// LocalState implements memberlist.Delegate: the adopted view, so a node
// joining (or syncing) learns the job's current generation.
func (d *delegate) LocalState(join bool) []byte { return d.state.get() }

// MergeRemoteState implements memberlist.Delegate: a peer's adopted view.
func (d *delegate) MergeRemoteState(b []byte, join bool) {
	if len(b) > 0 {
		d.box.put(event{kind: evState, data: bytes.Clone(b)})
	}
}

// NotifyJoin implements memberlist.EventDelegate (called with memberlist's
// node lock held).
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.nodeEvent(evAlive, n) }

// NotifyUpdate implements memberlist.EventDelegate (called with memberlist's
// node lock held).
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.nodeEvent(evAlive, n) }

// NotifyLeave implements memberlist.EventDelegate: dead or left (called
// with memberlist's node lock held).
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.nodeEvent(evDead, n) }

// memberlistConfig builds memberlist's configuration for node name.
func memberlistConfig(c *Config, name string, key []byte, d *delegate, log zerolog.Logger) *memberlist.Config {
	m := memberlist.DefaultLANConfig()
	m.Name = name
	m.BindAddr, m.BindPort = c.BindAddr, c.BindPort
	m.AdvertiseAddr, m.AdvertisePort = c.AdvertiseAddr, c.BindPort // port 0: memberlist sets both
	m.Label = "ringtail/" + c.JobID
	m.SecretKey = key
	m.GossipVerifyIncoming, m.GossipVerifyOutgoing = true, true
	m.EnableCompression = false
	t := c.Timers
	m.ProbeInterval, m.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	m.SuspicionMult, m.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	m.AwarenessMaxMultiplier = t.AwarenessMaxMultiplier
	m.GossipInterval, m.GossipNodes = t.GossipInterval, t.GossipNodes
	m.GossipToTheDeadTime = 10 * t.ProbeInterval
	m.PushPullInterval, m.TCPTimeout = t.PushPullInterval, t.TCPTimeout
	m.IndirectChecks = 2
	m.RetransmitMult = 3
	m.Delegate, m.Events = d, d
	m.LogOutput = logWriter{log}
	return m
}

// logWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// zerolog events.
type logWriter struct{ log zerolog.Logger }

// Write implements io.Writer, one log line per call.
func (w logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	switch {
	case bytes.Contains(p, []byte("use of closed network connection")):
		// memberlist's probe and gossip goroutines racing its own
		// Shutdown: nothing is wrong.
		w.log.Debug().Str("component", "memberlist").Msg(line)
	case bytes.Contains(p, []byte("[ERR]")):
		w.log.Error().Str("component", "memberlist").Msg(line)
	case bytes.Contains(p, []byte("[WARN]")):
		w.log.Warn().Str("component", "memberlist").Msg(line)
	default:
		w.log.Debug().Str("component", "memberlist").Msg(line)
	}
	return len(p), nil
}

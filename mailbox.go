package ringtail

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// Tagged point-to-point messages (the send/recv/isend/irecv of MPI and
// torch.distributed) are eager messages, like the communicator's
// contributions (see Comm.Contribute): a sender never waits for the
// receiver to be ready, the receiver's links buffer each message whole as
// it arrives, and a Mailbox matches buffered messages with posted receives
// by source and tag. Eager delivery is what lets two ranks both send
// before they receive, and lets point-to-point traffic run beside
// collectives on the same communicator without either waiting for the
// other; the price is one copy on the receiving side.
//
// Tags: a Mailbox's messages are the engine's Messages class
// (internal/engine.Class: bit 31 of the tag on the wire), so they and
// contributions never meet, whatever their tags. Within the class, bit 30
// marks the Mailbox's own messages (MonitoredBarrier's), and callers have
// the tags 0..MaxTag.

// AnySource, as the source of Mailbox.Post, matches a message from any
// rank.
const AnySource = -1

// MaxTag is the largest tag a Mailbox caller may use; the tags above it
// are the mailbox's own (MonitoredBarrier).
const MaxTag = 1<<30 - 1

// DefaultMailboxBuffer bounds, by default, the bytes of messages that have
// arrived but match no posted receive yet.
const DefaultMailboxBuffer = 1 << 30

const (
	internalTag uint32 = MaxTag + 1 // bit 30: the mailbox's own messages
	tagArrive          = internalTag | 1
	tagVerdict         = internalTag | 2
)

// Mailbox sends and receives tagged point-to-point messages on a Comm,
// with MPI's matching rules: a receive names a source rank (or AnySource)
// and a tag, and takes the earliest-arrived message that matches and that
// no receive posted before it matches; messages from one rank with one
// tag are received in the order they were sent.
//
// A Mailbox takes only Mailbox messages off the links; contributions stay
// for Comm.NextContribution, TakeContribution and AllReduceTree, which may
// wait at the same time. Create one Mailbox per Comm, right after New:
// messages that arrive before it exists wait in the links' small queue
// that, when full, stalls the links they came on.
//
// Messages that arrive before their receive is posted are buffered up to
// a limit (DefaultMailboxBuffer); past it the mailbox stops taking new
// messages until a receive takes one, and senders wait (and fail at the
// operation timeout if nothing is ever received). The limit bounds what
// the Mailbox holds; a NextContribution waiting meanwhile reads past
// Mailbox messages and keeps them in the communicator until the Mailbox
// takes them.
type Mailbox struct {
	c     *Comm
	limit int
	me    int
	peers []int // every other rank: the senders a receive may hear from

	mu         sync.Mutex
	posted     []*Receive      // waiting for a message, in post order
	early      []*Contribution // arrived and unclaimed, in arrival order
	earlyBytes int
	room       chan struct{} // closed (and replaced) when early messages are taken
	err        error         // why the mailbox stopped (closed, failed), or nil

	sendMu sync.Mutex    // orders Start calls into sends; held by Close once stop is closed
	sends  chan *Sending // the sender goroutine's queue, in call order
	stop   chan struct{} // closed by Close
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	barrierMu sync.Mutex // serialises MonitoredBarrier; guards barriers
	barriers  uint32
}

// NewMailbox starts the mailbox of c: a goroutine that takes arriving
// Mailbox messages off c's links, one that fails the receives posted for
// a rank that died, and one that sends, in order. bufferLimit bounds
// the bytes of unclaimed messages (zero: DefaultMailboxBuffer). Close it
// before closing c.
func NewMailbox(c *Comm, bufferLimit int) (*Mailbox, error) {
	if bufferLimit < 0 {
		return nil, fmt.Errorf("ringtail: mailbox buffer limit %d is negative", bufferLimit)
	}
	if bufferLimit == 0 {
		bufferLimit = DefaultMailboxBuffer
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mailbox{c: c, limit: bufferLimit, me: c.Rank(), room: make(chan struct{}), sends: make(chan *Sending, 1024),
		stop: make(chan struct{}), ctx: ctx, cancel: cancel}
	if c.Size() == 1 {
		return m, nil // a world of one: nobody to talk to
	}
	for r := range c.Size() {
		if r != m.me {
			m.peers = append(m.peers, r)
		}
	}
	m.wg.Add(3)
	go m.receiveLoop()
	go m.watchDeaths()
	go m.sendLoop()
	return m, nil
}

// Receive is a posted receive; Wait for it.
type Receive struct {
	from int
	tag  uint32
	buf  Buffer
	m    *Mailbox
	done chan struct{}
	// set before done is closed
	source int
	err    error
}

// Sending is a send in progress; Wait for it.
type Sending struct {
	peer int
	tag  uint32
	buf  Buffer
	done chan struct{}
	err  error // set before done is closed
}

func (m *Mailbox) checkPeer(what string, r int, any bool) error {
	w := m.c.Size()
	if any && r == AnySource {
		if w < 2 {
			return fmt.Errorf("ringtail: %s from any rank: there is no other rank", what)
		}
		return nil
	}
	if r < 0 || r >= w || r == m.me {
		return fmt.Errorf("ringtail: %s: rank %d is not another rank of 0..%d", what, r, w-1)
	}
	return nil
}

func checkTag(what string, tag int) error {
	if tag < 0 || tag > MaxTag {
		return fmt.Errorf("ringtail: %s: tag %d outside 0..%d", what, tag, MaxTag)
	}
	return nil
}

// Start queues buf for rank peer with tag and returns at once; the
// message leaves after every message started before it. buf must not
// change until the Sending is done.
func (m *Mailbox) Start(peer, tag int, buf Buffer) (*Sending, error) {
	if err := errors.Join(m.checkPeer("send", peer, false), checkTag("send", tag), checkBuffer("send", buf)); err != nil {
		return nil, err
	}
	return m.start(peer, uint32(tag), buf)
}

func (m *Mailbox) start(peer int, tag uint32, buf Buffer) (*Sending, error) {
	s := &Sending{peer: peer, tag: tag, buf: buf, done: make(chan struct{})}
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	err := m.err
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case m.sends <- s:
		return s, nil
	case <-m.stop:
		return nil, ErrClosed
	}
}

// Send sends buf to rank peer with tag and returns once the message is
// handed to the transport (the receiver need not have posted a receive).
func (m *Mailbox) Send(ctx context.Context, peer, tag int, buf Buffer) error {
	s, err := m.Start(peer, tag, buf)
	if err != nil {
		return err
	}
	return s.Wait(ctx)
}

// Done is closed when the send has finished, well or not.
func (s *Sending) Done() <-chan struct{} { return s.done }

// Wait waits for the send to finish and returns its error. When ctx ends
// first it returns ctx's error and the send goes on (the buffer is still
// in use): a send that cannot be handed over fails the communicator at
// its operation timeout.
func (s *Sending) Wait(ctx context.Context) error {
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Post posts a receive of one message from rank from (or AnySource) with
// tag into buf and returns at once; buf must stay untouched until the
// Receive is done. The message must hold exactly buf's bytes and element
// type, else the receive fails with a KindMismatch *Error naming the
// sender (the message is consumed, the communicator stays usable).
func (m *Mailbox) Post(from, tag int, buf Buffer) (*Receive, error) {
	if err := errors.Join(m.checkPeer("receive", from, true), checkTag("receive", tag), checkBuffer("receive", buf)); err != nil {
		return nil, err
	}
	return m.post(from, uint32(tag), buf)
}

func (m *Mailbox) post(from int, tag uint32, buf Buffer) (*Receive, error) {
	r := &Receive{from: from, tag: tag, buf: buf, m: m, done: make(chan struct{}), source: AnySource}
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, m.err
	}
	for i, ct := range m.early {
		if r.matches(ct) {
			m.early = slices.Delete(m.early, i, i+1)
			m.earlyBytes -= len(ct.Data.Bytes)
			close(m.room)
			m.room = make(chan struct{})
			m.mu.Unlock()
			r.complete(ct)
			return r, nil
		}
	}
	if from != AnySource {
		if de := m.c.e.DeadErr(from); de != nil { // checked under mu: see failDead
			m.mu.Unlock()
			r.fail(public(de))
			return r, nil
		}
	}
	m.posted = append(m.posted, r)
	m.mu.Unlock()
	return r, nil
}

// Recv posts a receive and waits for it; it returns the sender's rank.
func (m *Mailbox) Recv(ctx context.Context, from, tag int, buf Buffer) (int, error) {
	r, err := m.Post(from, tag, buf)
	if err != nil {
		return AnySource, err
	}
	return r.Wait(ctx)
}

func (r *Receive) matches(ct *Contribution) bool {
	return ct.Tag == r.tag && (r.from == AnySource || r.from == ct.From)
}

// complete copies ct into the receive's buffer and finishes it.
func (r *Receive) complete(ct *Contribution) {
	defer ct.Release()
	r.source = ct.From
	if len(ct.Data.Bytes) != len(r.buf.Bytes) || ct.Data.DType != r.buf.DType {
		me := r.m.me
		r.err = &Error{Kind: KindMismatch, Rank: ct.From, Reporter: me, Local: me,
			Detail: fmt.Sprintf("rank %d sent %d × %v (%d bytes) with tag %d, rank %d's receive holds %d × %v (%d bytes)",
				ct.From, ct.Data.Len(), ct.Data.DType, len(ct.Data.Bytes), r.tag&^internalTag, me, r.buf.Len(), r.buf.DType, len(r.buf.Bytes))}
	} else {
		copy(r.buf.Bytes, ct.Data.Bytes)
	}
	close(r.done)
}

// fail finishes the receive with err.
func (r *Receive) fail(err error) {
	r.err = err
	close(r.done)
}

// Done is closed when the receive has finished, well or not.
func (r *Receive) Done() <-chan struct{} { return r.done }

// Wait waits for the message and returns its sender. When ctx ends first
// the receive is withdrawn (it will take no message; buf is free again)
// and Wait returns a KindTimeout or KindCanceled *Error naming the rank it
// waited for; the communicator stays usable.
func (r *Receive) Wait(ctx context.Context) (int, error) {
	select {
	case <-r.done:
		return r.source, r.err
	case <-ctx.Done():
	}
	if !r.Cancel() {
		<-r.done // matched meanwhile: the copy is under way
		return r.source, r.err
	}
	me := r.m.me
	e := &Error{Kind: KindTimeout, Rank: r.from, Reporter: me, Local: me, Err: ctx.Err()}
	if errors.Is(ctx.Err(), context.Canceled) {
		e.Kind = KindCanceled
	}
	if r.from == AnySource {
		e.Rank = transport.NoRank
		e.Detail = fmt.Sprintf("rank %d received no message with tag %d from any rank", me, r.tag)
	} else {
		e.Detail = fmt.Sprintf("rank %d received no message with tag %d from rank %d", me, r.tag, r.from)
	}
	return AnySource, e
}

// Cancel withdraws the receive if no message has matched it yet and
// reports whether it did; a withdrawn receive's Wait returns ErrCanceled.
func (r *Receive) Cancel() bool {
	m := r.m
	m.mu.Lock()
	i := slices.Index(m.posted, r)
	if i >= 0 {
		m.posted = slices.Delete(m.posted, i, i+1)
	}
	m.mu.Unlock()
	if i < 0 {
		return false
	}
	r.fail(ErrCanceled)
	return true
}

// ErrCanceled is the error of a receive withdrawn by Cancel.
var ErrCanceled = errors.New("ringtail: receive canceled")

// receiveLoop takes the Mailbox's messages off the links, matching each
// with the earliest posted receive that accepts it or keeping it for a
// later one.
func (m *Mailbox) receiveLoop() {
	defer m.wg.Done()
	e := m.c.e
	for {
		m.mu.Lock()
		full, room := m.earlyBytes >= m.limit, m.room
		m.mu.Unlock()
		if full { // stop taking: the links back up to the senders
			select {
			case <-room:
				continue
			case <-e.Failed():
				m.shutdown(public(e.Err()))
				return
			case <-m.stop:
				return
			}
		}
		raw, err := e.Take(m.ctx, engine.Messages, m.peers, nil)
		if err != nil {
			if m.ctx.Err() == nil { // not closed: the communicator failed
				m.shutdown(public(err))
			}
			return
		}
		m.deliver(m.c.wrap(raw))
	}
}

func (m *Mailbox) deliver(ct *Contribution) {
	m.mu.Lock()
	for i, r := range m.posted {
		if r.matches(ct) {
			m.posted = slices.Delete(m.posted, i, i+1)
			m.mu.Unlock()
			r.complete(ct)
			return
		}
	}
	m.early = append(m.early, ct)
	m.earlyBytes += len(ct.Data.Bytes)
	m.mu.Unlock()
}

// watchDeaths fails the receives waiting for a rank that died (a
// communicator with TolerateDeaths lives on after a death).
func (m *Mailbox) watchDeaths() {
	defer m.wg.Done()
	e := m.c.e
	deaths := e.Deaths() // taken before each scan: a death after it wakes the loop
	for {
		select {
		case <-deaths:
			deaths = e.Deaths()
			m.failDead()
		case <-e.Failed():
			return
		case <-m.stop:
			return
		}
	}
}

// failDead fails the receives posted for a rank known dead.
func (m *Mailbox) failDead() {
	m.mu.Lock()
	var dead []*Receive
	var errs []error
	m.posted = slices.DeleteFunc(m.posted, func(r *Receive) bool {
		if r.from == AnySource {
			return false
		}
		if e := m.c.e.DeadErr(r.from); e != nil {
			dead, errs = append(dead, r), append(errs, public(e))
			return true
		}
		return false
	})
	m.mu.Unlock()
	for i, r := range dead {
		r.fail(errs[i])
	}
}

// shutdown fails every posted receive with err and frees the early
// messages; later calls return err.
func (m *Mailbox) shutdown(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	posted, early := m.posted, m.early
	m.posted, m.early, m.earlyBytes = nil, nil, 0
	m.mu.Unlock()
	for _, r := range posted {
		r.fail(err)
	}
	for _, ct := range early {
		ct.Release()
	}
}

// sendLoop sends queued messages one after the other, so messages to one
// rank arrive in the order they were started.
func (m *Mailbox) sendLoop() {
	defer m.wg.Done()
	for {
		select {
		case s := <-m.sends:
			s.err = public(m.c.e.Post(m.ctx, s.peer, s.buf.Bytes, s.buf.DType, engine.Messages, s.tag))
			close(s.done)
		case <-m.stop:
			return
		}
	}
}

// Close stops the mailbox: sends not yet handed to the transport and
// posted receives fail with ErrClosed, unclaimed messages are dropped.
// Safe to call twice.
func (m *Mailbox) Close() error {
	m.mu.Lock()
	if m.err == nil {
		m.err = ErrClosed
	}
	select {
	case <-m.stop:
		m.mu.Unlock()
		return nil
	default:
	}
	close(m.stop)
	m.cancel()
	m.mu.Unlock()
	m.wg.Wait()
	m.sendMu.Lock() // a Start blocked on a full queue has seen stop and left
	defer m.sendMu.Unlock()
	for len(m.sends) > 0 {
		s := <-m.sends
		s.err = ErrClosed
		close(s.done)
	}
	m.shutdown(ErrClosed)
	return nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// Tagged point-to-point messages (ringtail.Mailbox: the send/recv of MPI
// and torch.distributed) are eager messages of the Messages class: a
// sender never waits for the receiver, the receiver's links buffer each
// message whole, and a Mailbox matches them with posted receives by source
// and tag. Within the class, bit 30 of the tag marks the Mailbox's own
// messages (MonitoredBarrier's); callers have the tags 0..MaxUserTag.

// AnySource, as the source of Mailbox.Post, matches a message from any
// rank.
const AnySource = -1

// MaxUserTag is the largest tag a Mailbox caller may use.
const MaxUserTag = 1<<30 - 1

// DefaultMailboxBuffer bounds, by default, the bytes of messages that have
// arrived but match no posted receive yet.
const DefaultMailboxBuffer = 1 << 30

const (
	internalTag uint32 = MaxUserTag + 1 // bit 30: the mailbox's own messages
	tagArrive          = internalTag | 1
	tagVerdict         = internalTag | 2
)

// ErrCanceled is the error of a receive withdrawn by Receive.Cancel.
var ErrCanceled = errors.New("ringtail: receive canceled")

// Mailbox sends and receives tagged messages with MPI's matching rules
// (see ringtail.Mailbox). Its unclaimed messages wait in the engine's
// matching queue (mailbox) with every other eager message, and its posted
// receives are matched there, by whichever taker reads the links; three
// goroutines read the links when no other taker does (within the buffer
// limit), fail the receives posted for a rank that died, and send in
// order. Every error it returns has been through the public function its
// creator gave.
type Mailbox struct {
	e      *Engine
	public func(error) error // the caller's error type (ringtail.Error)
	limit  int
	me     int

	// guarded by the engine's e.box.mu
	posted []*Receive // waiting for a message, in post order
	err    error      // why the mailbox stopped (closed, failed), or nil

	sendMu sync.Mutex    // orders Start calls into sends; held by Close once stop is closed
	sends  chan *Sending // the sender goroutine's queue, in call order
	stop   chan struct{} // closed by Close
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	barrierMu sync.Mutex // serialises MonitoredBarrier; guards barriers
	barriers  uint32
}

// NewMailbox starts e's mailbox; bufferLimit (not negative) bounds the
// bytes of unclaimed messages (zero: DefaultMailboxBuffer), and public
// converts the errors it returns.
func NewMailbox(e *Engine, bufferLimit int, public func(error) error) (*Mailbox, error) {
	if bufferLimit < 0 {
		return nil, fmt.Errorf("ringtail: mailbox buffer limit %d is negative", bufferLimit)
	}
	if bufferLimit == 0 {
		bufferLimit = DefaultMailboxBuffer
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mailbox{e: e, public: public, limit: bufferLimit, me: e.s.Rank,
		sends: make(chan *Sending, 1024), stop: make(chan struct{}), ctx: ctx, cancel: cancel}
	if e.s.WorldSize == 1 {
		return m, nil // a world of one: nobody to talk to
	}
	b := &e.box
	b.mu.Lock()
	b.tagged = append(b.tagged, m)
	b.mu.Unlock()
	m.wg.Add(3)
	go m.receiveLoop()
	go m.watchDeaths()
	go m.sendLoop()
	return m, nil
}

// Receive is a posted receive (ringtail.Receive); Wait for it.
type Receive struct {
	from int
	tag  uint32
	buf  []byte
	dt   reduce.DType
	m    *Mailbox
	done chan struct{}
	// set before done is closed
	source int
	err    error
}

// Sending is a send in progress (ringtail.Sending); Wait for it.
type Sending struct {
	peer int
	tag  uint32
	buf  []byte
	dt   reduce.DType
	done chan struct{}
	err  error // set before done is closed
}

// Check reports whether r is a rank this mailbox may send to or (any: or
// AnySource) receive from, and tag a caller's tag.
func (m *Mailbox) Check(what string, r int, any bool, tag int) error {
	var tagErr error
	if tag < 0 || tag > MaxUserTag {
		tagErr = fmt.Errorf("ringtail: %s: tag %d outside 0..%d", what, tag, MaxUserTag)
	}
	return errors.Join(m.checkPeer(what, r, any), tagErr)
}

func (m *Mailbox) checkPeer(what string, r int, any bool) error {
	w := m.e.s.WorldSize
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

// Start queues buf for rank peer with tag; the message leaves after
// every message started before it.
func (m *Mailbox) Start(peer int, tag uint32, buf []byte, dt reduce.DType) (*Sending, error) {
	s := &Sending{peer: peer, tag: tag, buf: buf, dt: dt, done: make(chan struct{})}
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.e.box.mu.Lock()
	err := m.err
	m.e.box.mu.Unlock()
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
// tag into buf.
func (m *Mailbox) Post(from int, tag uint32, buf []byte, dt reduce.DType) (*Receive, error) {
	r := &Receive{from: from, tag: tag, buf: buf, dt: dt, m: m, done: make(chan struct{}), source: AnySource}
	b := &m.e.box
	b.mu.Lock()
	if m.err != nil {
		b.mu.Unlock()
		return nil, m.err
	}
	msg, ok := b.takeHeldLocked(func(msg *transport.Eager) bool {
		return Messages.owns(msg.Tag) && r.matches(transport.Eager{From: msg.From, Tag: msg.Tag &^ classBit})
	})
	if ok {
		b.mu.Unlock()
		msg.Tag &^= classBit
		r.complete(msg)
		return r, nil
	}
	if from != AnySource {
		if de := m.e.DeadErr(from); de != nil { // checked under the lock: see failDead
			b.mu.Unlock()
			r.fail(m.public(de))
			return r, nil
		}
	}
	m.posted = append(m.posted, r)
	b.mu.Unlock()
	return r, nil
}

func (r *Receive) matches(msg transport.Eager) bool {
	return msg.Tag == r.tag && (r.from == AnySource || r.from == msg.From)
}

// complete copies msg into the receive's buffer and finishes it.
func (r *Receive) complete(msg transport.Eager) {
	defer r.m.e.Release(msg)
	r.source = msg.From
	dt := reduce.DType(msg.DType)
	if len(msg.Data) != len(r.buf) || dt != r.dt {
		me := r.m.me
		r.err = r.m.public(&transport.Error{Kind: transport.KindMismatch, Rank: msg.From, Reporter: me, Local: me,
			Detail: fmt.Sprintf("rank %d sent %d × %v (%d bytes) with tag %d, rank %d's receive holds %d × %v (%d bytes)",
				msg.From, elems(len(msg.Data), dt), dt, len(msg.Data), r.tag&^internalTag, me, elems(len(r.buf), r.dt), r.dt, len(r.buf))})
	} else {
		copy(r.buf, msg.Data)
	}
	close(r.done)
}

// elems is the number of dt elements in n bytes (0 for an invalid dt).
func elems(n int, dt reduce.DType) int {
	if s := dt.Size(); s > 0 {
		return n / s
	}
	return 0
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
// and Wait returns a KindTimeout or KindCanceled error (ringtail's *Error)
// naming the rank it waited for; the communicator stays usable.
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
	e := &transport.Error{Kind: transport.KindTimeout, Rank: r.from, Reporter: me, Local: me, Err: ctx.Err()}
	if errors.Is(ctx.Err(), context.Canceled) {
		e.Kind = transport.KindCanceled
	}
	if r.from == AnySource {
		e.Rank = transport.NoRank
		e.Detail = fmt.Sprintf("in recv of tag %d from any rank", r.tag)
	} else {
		e.Detail = fmt.Sprintf("in recv of tag %d", r.tag)
	}
	return AnySource, r.m.public(e)
}

// Cancel withdraws the receive if no message has matched it yet and
// reports whether it did; a withdrawn receive's Wait returns ErrCanceled.
func (r *Receive) Cancel() bool {
	m, b := r.m, &r.m.e.box
	b.mu.Lock()
	i := slices.Index(m.posted, r)
	if i >= 0 {
		m.posted = slices.Delete(m.posted, i, i+1)
	}
	b.mu.Unlock()
	if i < 0 {
		return false
	}
	r.fail(ErrCanceled)
	return true
}

// receiveLoop reads the links for the Mailbox's messages while their
// unclaimed bytes are under the limit: each goes to the earliest posted
// receive that matches it, or waits in the engine's queue for a later one.
func (m *Mailbox) receiveLoop() {
	defer m.wg.Done()
	e, b := m.e, &m.e.box
	for {
		b.mu.Lock()
		full, room := b.messageBytes >= m.limit, b.room
		b.mu.Unlock()
		if full { // stop reading: the links back up to the senders
			select {
			case <-room:
				continue
			case <-e.Failed():
				m.shutdown(m.public(e.Err()))
				return
			case <-m.stop:
				return
			}
		}
		if err := e.readOne(m.ctx); err != nil {
			if m.ctx.Err() == nil { // not closed: the communicator failed
				m.shutdown(m.public(err))
			}
			return
		}
	}
}

// watchDeaths fails the receives waiting for a rank that died (a
// communicator with TolerateDeaths lives on after a death).
func (m *Mailbox) watchDeaths() {
	defer m.wg.Done()
	e := m.e
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
	b := &m.e.box
	b.mu.Lock()
	var dead []*Receive
	var errs []error
	m.posted = slices.DeleteFunc(m.posted, func(r *Receive) bool {
		if r.from == AnySource {
			return false
		}
		if de := m.e.DeadErr(r.from); de != nil {
			dead, errs = append(dead, r), append(errs, m.public(de))
			return true
		}
		return false
	})
	b.mu.Unlock()
	for i, r := range dead {
		r.fail(errs[i])
	}
}

// shutdown fails every posted receive with err and detaches the mailbox
// from the engine's queue, dropping the unclaimed messages when no other
// Mailbox is attached; later calls return err.
func (m *Mailbox) shutdown(err error) {
	b := &m.e.box
	b.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	posted := m.posted
	m.posted = nil
	var dropped []transport.Eager
	if i := slices.Index(b.tagged, m); i >= 0 {
		b.tagged = slices.Delete(b.tagged, i, i+1)
		for len(b.tagged) == 0 {
			msg, ok := b.takeHeldLocked(func(msg *transport.Eager) bool { return Messages.owns(msg.Tag) })
			if !ok {
				break
			}
			dropped = append(dropped, msg)
		}
	}
	b.mu.Unlock()
	for _, r := range posted {
		r.fail(err)
	}
	for _, msg := range dropped {
		m.e.Release(msg)
	}
}

// sendLoop sends queued messages one after the other, so messages to one
// rank arrive in the order they were started.
func (m *Mailbox) sendLoop() {
	defer m.wg.Done()
	for {
		select {
		case s := <-m.sends:
			s.err = m.public(m.e.Post(m.ctx, s.peer, s.buf, s.dt, Messages, s.tag))
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
	b := &m.e.box
	b.mu.Lock()
	if m.err == nil {
		m.err = ErrClosed
	}
	select {
	case <-m.stop:
		b.mu.Unlock()
		return nil
	default:
	}
	close(m.stop)
	m.cancel()
	b.mu.Unlock()
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

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Class says which user of the eager mailbox a message is for. Two users
// take eager messages from the same links, each with its own tags, and
// neither may take the other's:
//
//   - Contributions: Comm.Contribute, NextContribution and
//     TakeContribution, and the Collect ops of an AllReduceTree (the
//     straggler driver's and the coded allreduce's messages);
//   - Messages: the tagged point-to-point messages of a ringtail.Mailbox
//     (torch.distributed's send/recv) and its monitored barrier.
//
// The class travels in bit 31 of the message's tag (wire.Desc.Tag); each
// class has the 31-bit tags 0..MaxTag. Every take names its class and
// sees only that class's messages, with the class bit stripped from their
// tags, so a NextContribution never takes a Mailbox message and a Mailbox
// never takes a contribution, whatever their tags. (A Mailbox splits its
// class further: see tagged.go.)
type Class uint8

// The classes of eager messages.
const (
	Contributions Class = iota
	Messages
)

// classBit is the tag bit that carries the class on the wire.
const classBit uint32 = 1 << 31

// MaxTag is the largest tag of a class.
const MaxTag = classBit - 1

// wireTag is tag as sent for class cl.
func (cl Class) wireTag(tag uint32) uint32 {
	if cl == Messages {
		return tag | classBit
	}
	return tag
}

// owns reports whether a message whose tag on the wire is t is cl's.
func (cl Class) owns(t uint32) bool { return (t&classBit != 0) == (cl == Messages) }

// mailbox keeps the eager messages this rank received and has not yet
// taken, so that a caller can wait for one sender (and tag) while others
// arrive in any order, and several callers (a Mailbox's receives, a
// NextContribution, a Collect op) can wait at once. It is the one
// matching queue of the engine: a Mailbox's unclaimed messages stay in it
// too, and its posted receives are matched here.
//
// One taker at a time reads the links' inbox (it holds the reader token);
// it parks every message it reads in held, in arrival order, and wakes the
// others, which look through held again. So held is always in arrival
// order, and a message is taken by the first waiter that wants it,
// whoever read it. A Messages-class message that a posted receive of an
// attached Mailbox matches goes to that receive instead of held (so no
// held message ever matches a posted receive).
type mailbox struct {
	mesh   *transport.Mesh
	reader chan struct{} // the reader token: send to take it, receive to give it back

	mu           sync.Mutex
	held         []transport.Eager // received, not yet taken, in arrival order
	parked       chan struct{}     // closed (and replaced) when held gains messages
	tagged       []*Mailbox        // the Mailboxes whose posted receives parking matches
	messageBytes int               // the bytes of the Messages-class messages in held
	room         chan struct{}     // closed (and replaced) when messageBytes falls
}

func (b *mailbox) init(m *transport.Mesh) {
	b.mesh, b.reader, b.parked, b.room = m, make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
}

// takeHeldLocked removes and returns the earliest held message for which
// match holds.
func (b *mailbox) takeHeldLocked(match func(*transport.Eager) bool) (transport.Eager, bool) {
	for i := range b.held {
		if match(&b.held[i]) {
			m := b.held[i]
			b.held = append(b.held[:i], b.held[i+1:]...)
			if Messages.owns(m.Tag) {
				b.messageBytes -= len(m.Data)
				close(b.room)
				b.room = make(chan struct{})
			}
			return m, true
		}
	}
	return transport.Eager{}, false
}

// delivery is a message handed to the posted receive it matched.
type delivery struct {
	r   *Receive
	msg transport.Eager
}

// park appends messages read from the inbox to held, or hands each
// Messages-class message that a posted receive matches to it, and wakes
// the waiters.
func (b *mailbox) park(ms ...transport.Eager) {
	var out []delivery
	b.mu.Lock()
	for _, m := range ms {
		if r := b.claimLocked(m); r != nil {
			m.Tag &^= classBit
			out = append(out, delivery{r, m})
			continue
		}
		b.held = append(b.held, m)
		if Messages.owns(m.Tag) {
			b.messageBytes += len(m.Data)
		}
	}
	close(b.parked)
	b.parked = make(chan struct{})
	b.mu.Unlock()
	for _, d := range out {
		d.r.complete(d.msg)
	}
}

// claimLocked removes and returns the earliest posted receive of an
// attached Mailbox that the message m matches, or nil.
func (b *mailbox) claimLocked(m transport.Eager) *Receive {
	if !Messages.owns(m.Tag) {
		return nil
	}
	m.Tag &^= classBit
	for _, t := range b.tagged {
		for i, r := range t.posted {
			if r.matches(m) {
				t.posted = slices.Delete(t.posted, i, i+1)
				return r
			}
		}
	}
	return nil
}

// Post sends buf to peer as an eager message of class cl tagged tag
// (at most MaxTag): the peer buffers it on arrival without having to be
// ready. It returns once the data is handed to the transport.
func (e *Engine) Post(ctx context.Context, peer int, buf []byte, dt reduce.DType, cl Class, tag uint32) error {
	ctx, cancel := context.WithTimeout(ctx, e.s.OpTimeout)
	defer cancel()
	p, err := e.PostAsync(ctx, peer, buf, dt, cl, tag)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// Posting is an eager message handed to a link's writer: buf must not
// change until Done reports it sent.
type Posting struct {
	e     *Engine
	peer  int
	done  chan transport.Result
	claim *transport.Claim // withdraws the message, or waits for the writer, when Wait gives up
	sent  bool
	stats *transport.SendStats // a compressed post's cost, written by the writer before done
}

// PostOptions change how an eager message travels.
type PostOptions struct {
	// Compress sends the message's frames s2-compressed where that makes
	// them smaller; the receiver decodes them on arrival.
	Compress bool
}

// PostAsync queues buf for peer as an eager message tagged tag and returns
// at once (unless the link's queue is full); the message is sent in order
// with the link's other messages.
func (e *Engine) PostAsync(ctx context.Context, peer int, buf []byte, dt reduce.DType, cl Class, tag uint32) (*Posting, error) {
	return e.PostAsyncWith(ctx, peer, buf, dt, cl, tag, PostOptions{})
}

// PostAsyncWith is PostAsync with options.
func (e *Engine) PostAsyncWith(ctx context.Context, peer int, buf []byte, dt reduce.DType, cl Class, tag uint32, opt PostOptions) (*Posting, error) {
	if e.mesh == nil {
		return nil, ErrClosed
	}
	if peer < 0 || peer >= e.s.WorldSize || peer == e.s.Rank {
		return nil, fmt.Errorf("ringtail: eager message to %d: not another rank of 0..%d", peer, e.s.WorldSize-1)
	}
	if tag > MaxTag {
		return nil, fmt.Errorf("ringtail: eager message tag %#x above %#x (bit 31 is reserved)", tag, MaxTag)
	}
	p := &Posting{e: e, peer: peer, done: make(chan transport.Result, 1), claim: transport.NewClaim()}
	d := wire.Desc{Collective: wire.Eager, DType: uint8(dt), Tag: cl.wireTag(tag), Count: uint64(len(buf) / dt.Size())}
	req := transport.SendReq{Desc: d, Buf: buf, Chunk: e.tun.ChunkBytes, Done: p.done, Claim: p.claim}
	if opt.Compress {
		p.stats = &transport.SendStats{}
		req.Compress = p.stats
	}
	link := e.mesh.Link(peer, 0)
	if err := link.Send(req, ctx.Done()); err != nil {
		if transport.IsCanceled(err) {
			return nil, e.timeoutOn(peer, ctx.Err())
		}
		return nil, err
	}
	return p, nil
}

// Done reports whether the message has been sent (its buffer may be
// reused).
func (p *Posting) Done() bool {
	if !p.sent {
		select {
		case <-p.done:
			p.sent = true
		default:
		}
	}
	return p.sent
}

// Stats returns what a compressed post cost on the wire, once Done; false
// before, or for a post made without compression.
func (p *Posting) Stats() (transport.SendStats, bool) {
	if p.stats == nil || !p.Done() {
		return transport.SendStats{}, false
	}
	return *p.stats, true
}

// Wait waits until the message is sent, the peer dies (a tolerant mesh),
// the mesh fails, or ctx ends (a timeout that fails the mesh, naming the
// peer). When it returns, the link's writer no longer reads the buffer,
// whatever the outcome: a failed post's buffer may be reused at once (the
// caller's next step writes into it).
func (p *Posting) Wait(ctx context.Context) error {
	e := p.e
	for !p.sent {
		select {
		case <-p.done:
			p.sent = true
		case <-e.mesh.Failed():
			return p.letGo(e.mesh.Err())
		case <-e.mesh.Deaths():
			if de := e.mesh.DeadErr(p.peer); de != nil {
				return p.letGo(de) // the peer died mid-send (tolerated: the communicator lives on)
			}
		case <-ctx.Done():
			return p.letGo(e.timeoutOn(p.peer, ctx.Err()))
		}
	}
	return nil
}

// letGo returns err once the writer is done with the buffer: a message
// still queued is withdrawn; one being written ends with its link (the
// peer is dead or the mesh failed, so the write fails fast), or within the
// operation timeout, after which err is returned regardless.
func (p *Posting) letGo(err error) error {
	if p.claim.Withdraw() {
		return err
	}
	t := time.NewTimer(p.e.s.OpTimeout)
	defer t.Stop()
	select {
	case <-p.claim.Released():
	case <-p.done:
	case <-t.C:
	}
	return err
}

func (e *Engine) timeoutOn(peer int, err error) error {
	me := e.s.Rank
	te := &transport.Error{Kind: transport.KindTimeout, Rank: peer, Reporter: me, Local: me, Err: err,
		Detail: "in send"}
	if errors.Is(err, context.Canceled) {
		te.Kind = transport.KindCanceled
	}
	e.mesh.Fail(te)
	return te
}

// Take returns the earliest-arrived message of class cl not yet taken
// whose sender is in from and for which want (if not nil) holds; want and
// the returned message see the tag as it was posted (without the class
// bit). When ctx ends first it returns ctx's error, unwrapped, and the
// communicator stays usable: a deadline here is a policy (wait at most
// t_w), not a failure. Takes may run concurrently, with different classes,
// senders and tags; each message goes to one of them.
func (e *Engine) Take(ctx context.Context, cl Class, from []int, want func(from int, tag uint32) bool) (transport.Eager, error) {
	if e.mesh == nil {
		return transport.Eager{}, ErrClosed
	}
	match := func(m *transport.Eager) bool {
		if !cl.owns(m.Tag) {
			return false
		}
		in := false
		for _, f := range from {
			in = in || f == m.From
		}
		return in && (want == nil || want(m.From, m.Tag&^classBit))
	}
	b := &e.box
	for {
		b.mu.Lock()
		m, ok := b.takeHeldLocked(match)
		parked := b.parked
		b.mu.Unlock()
		if ok {
			m.Tag &^= classBit
			return m, nil
		}
		select {
		case b.reader <- struct{}{}: // this taker reads the inbox until a message comes
			// The reader before it may have parked this taker's message
			// as it gave the token back: look once more (only the token's
			// holder parks, so nothing can be parked after this look).
			b.mu.Lock()
			m, ok := b.takeHeldLocked(match)
			b.mu.Unlock()
			if ok {
				<-b.reader
				m.Tag &^= classBit
				return m, nil
			}
			select {
			case m := <-e.mesh.Inbox():
				b.park(m)
				<-b.reader
			case <-e.mesh.Failed():
				<-b.reader
				return transport.Eager{}, e.mesh.Err()
			case <-ctx.Done():
				<-b.reader
				return transport.Eager{}, ctx.Err()
			}
		case <-parked: // another taker parked messages: look again
		case <-e.mesh.Failed():
			return transport.Eager{}, e.mesh.Err()
		case <-ctx.Done():
			return transport.Eager{}, ctx.Err()
		}
	}
}

// TryTake returns an already-arrived contribution (class Contributions)
// from rank from for which want holds, without waiting. What the links
// have delivered is parked first, unless another taker is reading them
// right now (it parks what it reads at once).
func (e *Engine) TryTake(from int, want func(int, uint32) bool) (transport.Eager, bool) {
	if e.mesh == nil {
		return transport.Eager{}, false
	}
	b := &e.box
	select {
	case b.reader <- struct{}{}:
		var got []transport.Eager
	drain:
		for {
			select {
			case m := <-e.mesh.Inbox():
				got = append(got, m)
			default:
				break drain
			}
		}
		if len(got) > 0 {
			b.park(got...)
		}
		<-b.reader
	default:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.takeHeldLocked(func(m *transport.Eager) bool {
		return m.From == from && Contributions.owns(m.Tag) && want(m.From, m.Tag)
	})
	return m, ok
}

// readOne reads one message from the links' inbox and parks it (a
// Mailbox's reader: a posted receive that matches takes it), waiting for
// the reader token if another taker holds it.
func (e *Engine) readOne(ctx context.Context) error {
	b := &e.box
	select {
	case b.reader <- struct{}{}:
	case <-e.mesh.Failed():
		return e.mesh.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.reader }()
	select {
	case m := <-e.mesh.Inbox():
		b.park(m)
		return nil
	case <-e.mesh.Failed():
		return e.mesh.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release returns an eager message's memory for reuse.
func (e *Engine) Release(m transport.Eager) {
	if e.mesh != nil {
		e.mesh.Release(m)
	}
}

// Deaths returns a channel closed at the next death of a peer (a
// communicator with TolerateDeaths lives on after one); nil, which never
// closes, in a world of one.
func (e *Engine) Deaths() <-chan struct{} {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Deaths()
}

// DeadErr returns why rank r died, or nil if it is not known dead.
func (e *Engine) DeadErr(r int) error {
	if e.mesh == nil {
		return nil
	}
	if de := e.mesh.DeadErr(r); de != nil {
		return de
	}
	return nil
}

// Failed returns a channel closed when the communicator fails or closes
// (nil, which never closes, in a world of one); Err then says why.
func (e *Engine) Failed() <-chan struct{} {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Failed()
}

// Err returns the failure that ended the communicator, or nil.
func (e *Engine) Err() error {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Err()
}

// mailboxOf adapts the engine's mailbox to the executor's Collect ops,
// which take contributions only.
type mailboxOf struct{ e *Engine }

func tagMatch(want, mask uint32) func(int, uint32) bool {
	return func(_ int, t uint32) bool { return t&mask == want&mask }
}

// Take waits for a contribution from one rank; a death of that rank
// (tolerated meshes) ends the wait with the death's error.
func (m mailboxOf) Take(ctx context.Context, from int, want, mask uint32) (transport.Eager, error) {
	e := m.e
	if de := e.mesh.DeadErr(from); de != nil {
		return transport.Eager{}, de
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deaths := e.mesh.Deaths()
	go func() { // a death ends the wait (the watcher ends with the wait)
		select {
		case <-deaths:
			if e.mesh.DeadErr(from) != nil {
				cancel()
			}
		case <-ctx.Done():
		}
	}()
	msg, err := e.Take(ctx, Contributions, []int{from}, tagMatch(want, mask))
	if err != nil {
		if de := e.mesh.DeadErr(from); de != nil {
			return transport.Eager{}, de
		}
	}
	return msg, err
}

// TryTake returns a matching contribution that has already arrived.
func (m mailboxOf) TryTake(from int, want, mask uint32) (transport.Eager, bool) {
	return m.e.TryTake(from, tagMatch(want, mask))
}

// Release returns a message's memory.
func (m mailboxOf) Release(msg transport.Eager) { m.e.Release(msg) }

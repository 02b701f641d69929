//go:build linux

package transport

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// A fastbox is a two-slot mailbox per direction of a shared-memory link for
// small and mid-sized collectives (recursive doubling, barriers, rings of
// segments up to FastboxPayload): the
// executor writes the message into the next slot and publishes its number,
// the peer's executor spins on that slot and folds the payload straight out
// of it. No goroutine hand-off, no system call, no wake-up. Each slot's
// first cache line holds the message number, the size, the descriptor, the
// first payload bytes and the producer's count of messages it has taken
// from the other direction: in an exchange (both ranks send, then both
// receive) a sender learns that its slot is free from the line it has just
// read, so an 8-byte allreduce costs one cache-line write and one read per
// rank. The consumer also publishes its count on a line of its own, read
// only when the piggybacked count is not enough (one-way traffic: chains,
// trees). Waiting spins briefly, then yields the CPU (sched_yield, for more
// ranks than cores), then sleeps in short naps, so a late peer costs little
// CPU; every wait watches the mesh for failure and the call's deadline.

// FastboxPayload is the largest message a fastbox carries. Programs whose
// messages all fit run synchronously on fastboxes, with no goroutine
// hand-off: recursive doubling for small calls, the ring's segments up
// to 512 KiB (allreduce up to 1 MiB at 2 ranks, 2 MiB at 4), and larger
// allreduces in pieces (ring.AllReducePieces) where they measure faster. Measured, 2
// ranks on 2 CPUs: 16 KiB 60 → 1.4–2.7 µs, 1 MiB 139 → 45–54 µs; 4
// ranks, 1 MiB 572 → 146–149 µs (docs/log.md, run F). The slots cost 2 MiB
// of shared memory per link, untouched until used.
const FastboxPayload = 512 << 10

// The first payload bytes share the slot's first cache line.
const _ = uint(64 - fastboxData - 8)

const (
	// Layout of one slot: message number, the producer's count of
	// messages taken from the other direction, descriptor, size, payload.
	// The payload starts in the slot's first cache line, so an 8-byte
	// message is one line for the producer to write and the consumer to
	// read; with the payload on the second line (offset 64) every message
	// costs two cross-CPU line transfers. Measured, 2 ranks, 8-byte
	// allreduce: see docs/log.md, run I.
	slotTaken   = 8
	slotDesc    = 16 // wire.DescSize bytes
	slotSize    = slotDesc + wire.DescSize
	fastboxData = (slotSize + 4 + 7) &^ 7 // 8-byte aligned
	slotSpan    = (fastboxData + FastboxPayload + 63) &^ 63
	fastboxAck  = 2 * slotSpan
	fastboxDead = fastboxAck + 64
	fastboxSpan = fastboxDead + 64
	shmSize     = 2*(shmCtrl+ShmRingSize) + 2*fastboxSpan
)

// fastSlot is one message slot in shared memory.
type fastSlot struct {
	seq   *atomic.Uint64       // number of the message in the slot (1, 2, ...)
	taken *atomic.Uint64       // the producer's count of messages taken from the other direction
	size  *atomic.Uint32       // payload length
	desc  *[wire.DescSize]byte // descriptor
	data  []byte
}

// fastbox is one direction of a link's fastboxes. The counters without a
// pointer are the local side's own bookkeeping; only the executor (one
// collective at a time) touches them.
type fastbox struct {
	slots [2]fastSlot
	ack   *atomic.Uint64 // messages consumed (consumer)
	dead  *atomic.Uint32 // the producer's communicator failed: take nothing more

	sent  uint64 // producer: messages published
	freed uint64 // producer: messages known consumed
	got   uint64 // consumer: messages consumed
}

func fastboxAt(mem []byte) fastbox {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	var b fastbox
	for i := range b.slots {
		off := i * slotSpan
		sb := unsafe.Add(base, off)
		b.slots[i] = fastSlot{
			seq:   (*atomic.Uint64)(sb),
			taken: (*atomic.Uint64)(unsafe.Add(sb, slotTaken)),
			size:  (*atomic.Uint32)(unsafe.Add(sb, slotSize)),
			desc:  (*[wire.DescSize]byte)(unsafe.Add(sb, slotDesc)),
			data:  mem[off+fastboxData : off+fastboxData+FastboxPayload],
		}
	}
	b.ack = (*atomic.Uint64)(unsafe.Add(base, fastboxAck))
	b.dead = (*atomic.Uint32)(unsafe.Add(base, fastboxDead))
	return b
}

// pending reports whether the producer has published a message this side
// has not taken.
func (b *fastbox) pending() bool {
	return b.slots[b.got&1].seq.Load() == b.got+1
}

// waiter paces a wait: spin, then yield, then nap; it reports whether the
// caller must stop (mesh failed or deadline passed).
type waiter struct {
	start    time.Time
	i        int
	timeout  time.Duration // from the first clock read; 0: none
	deadline time.Time
	failed   <-chan struct{}
	cancel   <-chan struct{}
	link     *Link
	local    bool      // the peer is in this process
	yielded  time.Time // when the last sched_yield returned
	desc     Desc      // the call waited in (a copy: the caller's stays on its stack)
	stall    *Stall    // how to judge a stall (nil: only the deadline)
	asked    time.Time // when the peer was last asked what it is doing
	answers  uint64    // answers seen when it was asked
	// ready and readyAt say whether what the wait waits for has come
	// (ready.Load() ≥ readyAt; a nil ready: never): an answer that the
	// peer finished the call is read after the peer's message was
	// published (the socket orders them), so the slot is looked at again
	// before the answer is judged. Counters rather than a closure, so
	// that a wait allocates nothing.
	ready    *atomic.Uint64
	readyAt  uint64
	reported bool // Stall.Waiting has heard of this wait
}

// check runs a long wait's stall rules; non-nil when the wait must end.
func (w *waiter) check(now time.Time) error {
	m := w.link.mesh
	if w.stall == nil {
		return nil
	}
	if m.Asked() {
		m.AnswerAsks(&w.desc, w.stall.Done)
	}
	if w.link.Answers() > w.answers {
		st, n := w.link.Answer()
		w.answers = n
		if f, why := JudgeState(&w.desc, &st); why != "" && (w.ready == nil || w.ready.Load() < w.readyAt) {
			e := w.link.StallError(&w.desc, &st, f, why)
			m.fail(e)
			return e
		}
	}
	if now.Sub(w.start) < QueryAfter || now.Sub(w.asked) < QueryAfter {
		return nil
	}
	w.asked, w.answers = now, w.link.Answers()
	w.link.Ask(&w.desc)
	if e := m.JudgeHeld(&w.desc, w.stall.Done, w.stall.Expects); e != nil {
		m.fail(e)
		return e
	}
	return nil
}

const (
	fastYield = time.Millisecond
	fastNap   = 20 * time.Microsecond
	// fastResume is how long a wait polls after sched_yield returns
	// before it yields again. Ranks that share CPUs yield to each other
	// at about the same time on every CPU; the peer a resumed rank
	// waits for is often being switched in on another CPU just then
	// (a switch costs about 1.7 µs on the 2-CPU test machine), and
	// yielding at once would switch back to the rank that just left.
	// Measured, 4 ranks on 2 CPUs, 8-byte allreduce: 4.8–7.6 µs without,
	// 3.6–4.8 µs with 3–10 µs (docs/log.md, run F).
	fastResume = 4 * time.Microsecond
)

func (w *waiter) pause() error {
	w.i++
	if w.i&63 != 0 {
		return nil // a plain poll costs a nanosecond, a clock read tens
	}
	now := time.Now()
	if w.start.IsZero() {
		w.start = now
		if w.timeout > 0 {
			w.deadline = now.Add(w.timeout)
		}
	}
	// Two one-case selects: each is a lock-free poll, a two-case select
	// locks both channels.
	select {
	case <-w.failed:
		return errMeshFailed
	default:
	}
	select {
	case <-w.cancel:
		return errCanceled
	default:
	}
	if !w.deadline.IsZero() && now.After(w.deadline) {
		return errFastDeadline
	}
	if w.i&1023 == 0 {
		if !w.reported && w.stall != nil && w.stall.Waiting != nil && now.Sub(w.start) >= WaitReport {
			w.reported = true
			w.stall.Waiting(w.link.peer, w.start, now)
		}
		if de := w.link.mesh.DeadErr(w.link.peer); de != nil {
			w.link.mesh.Fail(de)
			return errMeshFailed
		}
		if err := w.check(now); err != nil {
			return err
		}
	}
	switch since := now.Sub(w.start); {
	case since < w.link.mesh.cfg.FastSpin:
	case since < fastYield:
		// Give the CPU to the peer: a goroutine of this process (in-
		// process ranks) or another process (more ranks than cores).
		// sched_yield returns at once: a raw call spares the runtime's
		// hand-off of this thread's P.
		if w.local {
			runtime.Gosched()
		} else if now.Sub(w.yielded) >= fastResume {
			syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			w.yielded = time.Now()
		}
	default:
		time.Sleep(fastNap)
	}
	return nil
}

// FastLink is implemented by links that can move small messages through a
// fastbox; the executor drives it synchronously.
type FastLink struct{ l *Link }

// Fast returns the link's fastbox driver, or false if it has none.
func (l *Link) Fast() (FastLink, bool) {
	c, ok := l.conn.(*shmConn)
	if !ok || c.mem == nil {
		return FastLink{}, false
	}
	return FastLink{l}, true
}

// Send publishes one message (at most FastboxPayload bytes), waiting (at
// most timeout, counted from when the wait starts) for a free slot: the
// peer must have taken the message before the previous one. A long wait
// applies the stall rules (see Stall).
func (f FastLink) Send(d *Desc, p []byte, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	c := f.l.conn.(*shmConn)
	if err := f.peerFailed(c, false); err != nil {
		return err
	}
	box := &c.fastOut
	if box.sent-box.freed >= 2 {
		// The peer's newest message to us says how many of ours it had
		// taken; its consumer count is the fallback.
		if in := &c.fastIn; in.got > 0 {
			box.freed = max(box.freed, in.slots[(in.got-1)&1].taken.Load())
		}
		if box.sent-box.freed >= 2 {
			box.freed = box.ack.Load()
		}
		if box.sent-box.freed >= 2 {
			if err := f.waitFree(c, d, timeout, cancel, stall); err != nil {
				return err
			}
		}
	}
	if len(p) > FastboxPayload {
		return fmt.Errorf("fastbox: %d-byte message exceeds %d", len(p), FastboxPayload)
	}
	sl := &box.slots[box.sent&1]
	// Plain stores, published by the atomic store of the message number
	// (an atomic store of each would stall on the line's ownership once
	// per word).
	wire.PutDesc(sl.desc[:], d)
	*(*uint32)(unsafe.Pointer(sl.size)) = uint32(len(p))
	*(*uint64)(unsafe.Pointer(sl.taken)) = c.fastIn.got
	copy(sl.data, p)
	box.sent++
	sl.seq.Store(box.sent)
	return nil
}

// waitFree waits until the peer has taken one of the two messages in
// flight (Send's slow path, kept out of Send so that the waiter and its
// closure are allocated only when a wait happens).
func (f FastLink) waitFree(c *shmConn, d *Desc, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	box := &c.fastOut
	w := waiter{timeout: timeout, failed: f.l.mesh.failed, cancel: cancel, link: f.l, local: c.local, desc: *d, stall: stall,
		ready: box.ack, readyAt: box.sent - 1} // sent−ack < 2
	for box.sent-box.freed >= 2 {
		if err := w.pause(); err != nil {
			return f.err(err)
		}
		box.freed = box.ack.Load()
		if w.i&1023 == 0 && box.sent-box.freed >= 2 && c.fastIn.dead.Load() != 0 {
			// The peer will never take them: it closed (or failed) while
			// this rank waited for a slot. A link marked gone by its close
			// between collectives is used here, as in waitMessage.
			if err := f.peerFailed(c, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitMessage waits for the peer's next fastbox message (Recv's slow
// path, kept out of Recv for the same reason as waitFree).
func (f FastLink) waitMessage(c *shmConn, d *Desc, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	box := &c.fastIn
	sl := &box.slots[box.got&1]
	w := waiter{timeout: timeout, failed: f.l.mesh.failed, cancel: cancel, link: f.l, local: c.local, desc: *d, stall: stall,
		ready: sl.seq, readyAt: box.got + 1} // the slot's next message (never more: two in flight)
	for sl.seq.Load() != box.got+1 {
		if err := w.pause(); err != nil {
			return f.err(err)
		}
		if w.i&1023 == 0 && box.dead.Load() != 0 {
			if err := f.peerFailed(c, true); err != nil {
				return err
			}
		}
		if w.i&1023 == 0 && f.l.holding.Load() && sl.seq.Load() != box.got+1 {
			// The peer sent a ring frame where this rank waits for its
			// fastbox message: it is not the same call (a larger count,
			// most likely, or a later call: it sent nothing of this one
			// here). The slot is checked after the frame: a peer that
			// finished this call published its fastbox message before
			// its next call's frames, so it would be seen here.
			if theirs, ok := f.l.Held(); ok && sl.seq.Load() != box.got+1 {
				return f.mismatch(theirs, d)
			}
		}
	}
	return nil
}

// Recv waits for the peer's next message, checks it against d, and copies
// or folds it into dst (with fold, a positive div then divides it: see
// reduce.ApplyScaled). A long wait applies the stall rules (see Stall).
func (f FastLink) Recv(d *Desc, dst []byte, fold bool, div int, dt reduce.DType, op reduce.Op, timeout time.Duration, cancel <-chan struct{}, stall *Stall) error {
	c := f.l.conn.(*shmConn)
	box := &c.fastIn
	sl := &box.slots[box.got&1]
	if err := f.peerFailed(c, true); err != nil {
		return err
	}
	if sl.seq.Load() != box.got+1 {
		if err := f.waitMessage(c, d, timeout, cancel, stall); err != nil {
			return err
		}
	}
	if len(dst) > FastboxPayload {
		return fmt.Errorf("fastbox: %d-byte message exceeds %d", len(dst), FastboxPayload)
	}
	if got := wire.GetDesc(sl.desc[:]); got != *d || int(sl.size.Load()) != len(dst) {
		return f.mismatch(got, d)
	}
	var err error
	if fold {
		err = reduce.ApplyScaled(dst, sl.data[:len(dst)], dt, op, div)
	} else {
		copy(dst, sl.data[:len(dst)])
	}
	box.got++
	box.ack.Store(box.got)
	return err
}

// mismatch fails the mesh: the peer made call theirs where this rank made
// mine (the same Desc: the two took different paths for it, so they
// disagree on the algorithm, e.g. their small-message thresholds).
func (f FastLink) mismatch(theirs Desc, mine *Desc) error {
	why := ""
	fld := theirs.Diff(mine)
	if fld == wire.FieldNone {
		why = "one sent it through the fastbox, the other on the ring: they disagree on the algorithm (different SmallBytes settings?)"
	}
	e := f.l.mismatch(&theirs, mine, fld, why)
	f.l.mesh.fail(e)
	return e
}

// peerFailed returns an error if the peer is known dead or has marked its
// fastbox dead (its communicator failed and its Abort frame, or its death,
// is on the way here): a message it published before failing must not
// complete a call. The collective then fails the mesh.
func (f FastLink) peerFailed(c *shmConn, recv bool) error {
	l := f.l
	if de := l.mesh.DeadErr(l.peer); de != nil {
		l.mesh.Fail(de)
		return l.mesh.Err()
	}
	switch c.fastIn.dead.Load() {
	case 0:
		return nil
	case fastboxClosed:
		if recv && c.fastIn.pending() {
			return nil // its last message, published before it closed
		}
		me := l.mesh.id.Rank
		e := &Error{Kind: KindClosed, Rank: l.peer, Reporter: l.peer, Local: me, Detail: "communicator closed"}
		l.mesh.Fail(e)
		return l.mesh.Err()
	}
	// Wait for the failure itself (its Abort frame, or the peer's death),
	// so that this rank names the culprit every rank names. The Abort of
	// a close may instead have marked the link gone (a clean close between
	// collectives fails the mesh only when the link is used again): this
	// is that use.
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-l.mesh.failed:
			break wait
		case <-l.mesh.Deaths():
			break wait
		case <-tick.C:
			if gone := l.gone(); gone != nil {
				return l.useGone(gone)
			}
		case <-t.C:
			break wait
		}
	}
	e := l.mesh.DeadErr(l.peer)
	if e == nil {
		me := l.mesh.id.Rank
		e = &Error{Kind: KindPeerDied, Rank: l.peer, Reporter: me, Local: me, Detail: "peer's communicator failed"}
	}
	l.mesh.Fail(e)
	return l.mesh.Err()
}

// markDead tells the peer's fastbox reader this side failed.
func (l *Link) markDead(clean bool) {
	if c, ok := l.conn.(*shmConn); ok && c.fastOut.dead != nil {
		v := uint32(fastboxFailed)
		if clean {
			v = fastboxClosed
		}
		c.fastOut.dead.Store(v)
	}
}

// Values of a fastbox's dead word.
const (
	fastboxFailed = 1 // the producer's communicator failed: its last message must not count
	fastboxClosed = 2 // the producer closed cleanly: what it published before stands
)

var (
	errMeshFailed   = fmt.Errorf("mesh failed")
	errFastDeadline = fmt.Errorf("deadline")
)

// FastPending reports the descriptor of a fastbox message from the peer
// that nobody has taken while the ring from that peer holds nothing unread,
// and how many frames this link has received so far. Seen by an executor
// whose ring receive from the peer makes no progress over several checks,
// it means the peer made a smaller call than this rank. (A peer that has
// finished its part of a large call may legitimately post its next, small
// call while its last ring chunk is still unread here; the ring-empty and
// no-progress conditions tell the two apart.)
func (l *Link) FastPending() (Desc, uint64, bool) {
	c, ok := l.conn.(*shmConn)
	if !ok || c.fastIn.ack == nil {
		return Desc{}, 0, false
	}
	frames := l.rxFrames.Load()
	pending := c.fastIn.pending() // load the fastbox first: the peer wrote its ring before it
	if !pending || c.in.head.Load() != c.in.tail.Load() {
		return Desc{}, frames, false
	}
	return wire.GetDesc(c.fastIn.slots[c.fastIn.got&1].desc[:]), frames, true
}

// IsDeadline reports whether a fastbox wait ended at its deadline.
func IsDeadline(err error) bool { return err == errFastDeadline }

func (f FastLink) err(err error) error {
	if err == errMeshFailed {
		return f.l.mesh.Err()
	}
	if _, ok := err.(*Error); ok {
		return f.l.mesh.Err() // a stall verdict failed the mesh
	}
	return err
}

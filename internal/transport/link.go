package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Desc describes the call a data frame belongs to (see wire.Desc). Every
// Data frame carries it, so a receiver detects a peer making a different
// call and names the field that differs.
type Desc = wire.Desc

// MaxEager bounds one eager message (the receiver allocates it whole).
const MaxEager = 1 << 30

// Eager is an eagerly received message: the receiver's link reader buffers
// it whole on arrival, without a posted receive (see Mesh.Inbox).
type Eager struct {
	From    int
	Tag     uint32
	DType   reduce.DType
	Data    []byte
	Arrived time.Time
}

// SendReq asks a link to send Buf as one message, split into frames of at
// most Chunk bytes (at least one frame, even when Buf is empty).
type SendReq struct {
	Desc  Desc
	Buf   []byte
	Chunk int
	Tag   int
	Done  chan<- Result
	// Compress, when not nil, sends an Eager message's frames
	// s2-compressed (each frame that compression makes smaller; the rest
	// plain) and records there what that cost before Done is signalled.
	// Nil on every collective's frames.
	Compress *SendStats
	// Claim, when not nil, lets the sender withdraw the request while it
	// is still queued and tells it when the writer is done with Buf, sent
	// or not (an eager message whose sender stops waiting early: Buf must
	// not change while the writer may still read it).
	Claim *Claim
	// Guard, when not nil, is the call's: the writer reads each frame of
	// Buf inside it, and drops the request once it is revoked.
	Guard *Guard
}

// Claim arbitrates a queued send's buffer between its sender and the
// link's writer: the sender may withdraw the send until the writer takes
// it; once taken, Released is closed when the writer has finished reading
// the buffer, whether the write succeeded or failed.
type Claim struct {
	state    atomic.Uint32 // claimQueued, claimTaken, claimReleased or claimWithdrawn
	released chan struct{}
}

const (
	claimQueued = iota
	claimTaken
	claimReleased
	claimWithdrawn
)

// NewClaim returns the claim of one queued send.
func NewClaim() *Claim { return &Claim{released: make(chan struct{})} }

// Withdraw stops the writer from taking the send and reports whether it
// did: true means the writer never reads the buffer; false means it has
// taken it (wait for Released).
func (c *Claim) Withdraw() bool {
	return c.state.CompareAndSwap(claimQueued, claimWithdrawn) || c.state.Load() == claimWithdrawn
}

// Released is closed once the writer has finished with a send it took.
func (c *Claim) Released() <-chan struct{} { return c.released }

// take is the writer's side of Withdraw: false if the send was withdrawn
// (a nil claim: always true).
func (c *Claim) take() bool { return c == nil || c.state.CompareAndSwap(claimQueued, claimTaken) }

// release tells the sender the writer is done with the buffer.
func (c *Claim) release() {
	if c != nil && c.state.CompareAndSwap(claimTaken, claimReleased) {
		close(c.released)
	}
}

// SendStats is what a compressed send cost (SendReq.Compress).
type SendStats struct {
	// Plain is the message's size; Wire the payload bytes that went on
	// the wire (headers not counted).
	Plain, Wire int64
	// Frames and Compressed count the message's frames and those sent
	// compressed.
	Frames, Compressed int
	// Encode is the time spent compressing.
	Encode time.Duration
}

// RecvReq asks a link to receive one message of exactly len(Buf) bytes:
// copied into Buf, or, with Reduce, folded into Buf with Op over DType.
type RecvReq struct {
	Desc   Desc
	Buf    []byte
	Reduce bool
	DType  reduce.DType
	Op     reduce.Op
	Tag    int
	Done   chan<- Result
	// Guard, when not nil, is the call's: the reader copies or folds each
	// frame into Buf inside it, and stops once it is revoked.
	Guard *Guard
}

// Result reports a completed request by its Tag. Failures are not reported
// here: they fail the whole Mesh (see Mesh.Failed).
type Result struct{ Tag int }

// LinkConfig tunes liveness detection and buffers of every link.
type LinkConfig struct {
	// Silence is how long a peer may send nothing at all (not even a
	// heartbeat) before it is declared dead or frozen. A read that times
	// out is retried once for a short grace (Silence/4) before the peer
	// is blamed, so a rank that was itself frozen and has just resumed
	// finds the heartbeats waiting for it instead of blaming a healthy
	// peer; the total silence before a verdict is Silence.
	Silence time.Duration
	// Heartbeat is how long a link may write nothing before it sends a
	// heartbeat; it must be at most a quarter of Silence.
	Heartbeat time.Duration
	// Chunk is the expected frame size, used to size reduce scratch.
	Chunk int
	// Names renders element types and operators in mismatch errors.
	Names wire.Names
}

// Validate checks the link timings.
func (c LinkConfig) Validate() error {
	if c.Silence <= 0 || c.Heartbeat <= 0 {
		return fmt.Errorf("transport: silence %v and heartbeat %v must be positive", c.Silence, c.Heartbeat)
	}
	if c.Heartbeat*4 > c.Silence {
		return fmt.Errorf("transport: heartbeat %v must be at most a quarter of the silence timeout %v", c.Heartbeat, c.Silence)
	}
	if c.Chunk <= 0 || c.Chunk > wire.MaxDataPayload {
		return fmt.Errorf("transport: chunk %d outside 1..%d", c.Chunk, wire.MaxDataPayload)
	}
	return nil
}

// grace is the re-check of a read that timed out (see LinkConfig.Silence).
func (c LinkConfig) grace() time.Duration { return c.Silence / 4 }

// readPiece bounds one payload read between read-deadline refreshes, so a
// slow but live link is never mistaken for a silent one.
const readPiece = 256 << 10

// heldCheck is how often a reader holding a frame that no receive has
// claimed asks whether this rank will ever claim it (see Mesh.judgeHeld).
const heldCheck = 50 * time.Millisecond

// tagAfterBytes is the largest payload whose tag is sent in the frame's
// one write; a larger frame's tag is computed and written after header
// and payload (one more write, while they go out), where hashing the
// payload first would delay the frame by more than a system call.
const tagAfterBytes = 64 << 10

// ctrlFrame is a control frame queued for the writer (a Query or a State).
type ctrlFrame struct {
	t       wire.Type
	payload []byte
}

// Link is one authenticated connection to a peer on one channel. Its
// reader goroutine owns rd, hdrR, scratch and heldTimer; its writer
// goroutine owns hdrW and bufs; wsem serialises frames between the writer
// and an abort.
type Link struct {
	mesh    *Mesh
	peer    int
	channel int
	conn    net.Conn
	cfg     LinkConfig

	sends chan SendReq
	posts chan RecvReq
	ctrl  chan ctrlFrame // queries and answers, written by the writer
	wsem  chan struct{}

	fold      inPlaceFold             // the in-place reduction in progress (reader-owned)
	foldFn    func(off int, p []byte) // l.applyFold, bound once
	rd        io.Reader               // buffered socket, or the shared-memory conn itself
	inPlace   inPlaceReader           // non-nil for shared memory: reduce without copying out
	hdrR      [wire.HeaderSize]byte
	scratch   []byte
	heldTimer *time.Timer

	hdrW      [wire.HeaderSize]byte
	zout      []byte // compressed frame (writer-owned; grown by the first compressed send)
	zin       []byte // compressed payload read (reader-owned; grown by the first compressed frame)
	bufs      net.Buffers
	bufArr    [3][]byte
	lastWrite time.Time
	sendSeq   uint32 // owned by the writer
	recvSeq   uint32 // owned by the reader

	// A data frame the reader holds while no receive is posted: holding
	// says there is one (polled by fastbox waits), held is its Desc.
	holding atomic.Bool
	heldMu  sync.Mutex
	held    Desc

	rxFrames atomic.Uint64 // data frames received, for progress checks

	// The peer's latest answer to a Query; states counts answers.
	stateMu sync.Mutex
	state   wire.State
	states  atomic.Uint64

	// postMu orders the executor's posts against a graceful close by the
	// peer: once peerGone is set, nothing more is posted to this link.
	postMu   sync.Mutex
	peerGone *Error

	// peerAborted is closed when the peer's abort arrives: it has failed
	// or left, reads nothing more of this link, and needs no abort back
	// (one would wait for a writer that may be stuck on the peer).
	// Only the reader closes it, once: every abort ends the read loop.
	peerAborted chan struct{}

	// fallback says why the link is not shared memory although both
	// ranks are on one host and wanted it ("": it is, or need not be).
	fallback string

	// seal and open protect the frames of a link that crosses hosts
	// (nil: frames go as they are; see FrameAuth): seal is used under
	// wsem, open by the reader alone. body is the checked payload of the
	// frame the reader read last: a sealed link reads each frame whole
	// into scratch and checks it before anything of it is acted on.
	seal, open *sealer
	body       []byte

	// expect is what the reader of a sealed link knows, before a data
	// frame's payload is read, of the message the frame must continue
	// (see tooLong); pending is a posted receive that readHeader took for
	// a data frame, handed to the read loop with that frame. Reader-owned.
	expect     frameExpect
	pending    RecvReq
	hasPending bool
}

// frameExpect is the message the next data frame on a link continues: its
// call, its number on the link and the bytes that remain of it.
type frameExpect struct {
	desc Desc
	seq  uint32
	rest int
	set  bool
}

// inPlaceReader is implemented by connections whose received bytes can be
// read where they lie (shared memory).
type inPlaceReader interface {
	ReadFunc(n, unit int, f func(off int, p []byte)) error
}

func newLink(m *Mesh, peer, channel int, conn net.Conn, cfg LinkConfig, keys *FrameKeys) (*Link, error) {
	l := &Link{
		mesh: m, peer: peer, channel: channel, conn: conn, cfg: cfg,
		sends: make(chan SendReq, 64), posts: make(chan RecvReq, 64), ctrl: make(chan ctrlFrame, 4),
		wsem: make(chan struct{}, 1), bufs: make(net.Buffers, 0, 3), peerAborted: make(chan struct{}),
	}
	l.foldFn = l.applyFold
	if ip, ok := conn.(inPlaceReader); ok {
		l.rd, l.inPlace = conn, ip
		setGrace(conn, cfg.grace())
	} else {
		l.rd, l.scratch = bufio.NewReaderSize(liveReader{conn, cfg.grace(), &m.halting}, 64<<10), make([]byte, cfg.Chunk)
	}
	if keys != nil && keys.mode != FrameAuthOff && crossesHost(conn) {
		enc := keys.mode == FrameAuthEncrypt
		var err error
		if l.seal, err = newSealer(&keys.send, enc); err != nil {
			return nil, err
		}
		if l.open, err = newSealer(&keys.recv, enc); err != nil {
			return nil, err
		}
		l.scratch = make([]byte, cfg.Chunk+TagSize)
	}
	return l, nil
}

// liveReader reads a connection whose read deadline marks a silent peer.
// When a read times out it tries once more for a short grace: if the peer's
// heartbeats were only waiting in the socket (this process was frozen
// while its deadline passed), they are read now, and only a peer silent
// for the grace too is reported.
type liveReader struct {
	conn    net.Conn
	grace   time.Duration
	halting *atomic.Bool // the mesh is halting: a timeout is final
}

func (r liveReader) Read(p []byte) (int, error) {
	n, err := r.conn.Read(p)
	if n == 0 && err != nil && isTimeout(err) && !r.halting.Load() {
		rearm(r.conn, time.Now().Add(r.grace), r.halting)
		n, err = r.conn.Read(p)
	}
	return n, err
}

// inPlaceFold is a reduction applied piece by piece to bytes read in place.
type inPlaceFold struct {
	dst []byte
	dt  reduce.DType
	op  reduce.Op
	err error
}

func (l *Link) applyFold(off int, p []byte) {
	if l.fold.err == nil {
		l.fold.err = reduce.Apply(l.fold.dst[off:off+len(p)], p, l.fold.dt, l.fold.op)
	}
}

// Shared reports whether the link moves data through shared memory.
func (l *Link) Shared() bool { return l.inPlace != nil }

// Peer returns the rank at the other end.
func (l *Link) Peer() int { return l.peer }

func (l *Link) start(wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); l.readLoop() }()
	go func() { defer wg.Done(); l.writeLoop() }()
}

// deadline arms the silence timeout for the next read; a read that runs
// into it is re-checked for a grace (liveReader), so the total is Silence.
func (l *Link) deadline() {
	rearm(l.conn, time.Now().Add(l.cfg.Silence-l.cfg.grace()), &l.mesh.halting)
}

// rearm sets c's read deadline to t unless the mesh is halting. Halt sets
// the flag, then a past deadline; rearm sets t, then looks at the flag: if
// its t came after Halt's past deadline, it sees the flag and puts the
// past deadline back, so a halted reader never waits again.
func rearm(c net.Conn, t time.Time, halting *atomic.Bool) {
	_ = c.SetReadDeadline(t)
	if halting.Load() {
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
}

func (l *Link) readFull(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), readPiece)
		l.deadline()
		if _, err := io.ReadFull(l.rd, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// readHeader reads the next frame's header. On a sealed link it reads the
// frame's payload and tag too and checks them (l.body is then the plain
// payload), so nothing of a frame, its header included, is acted on
// before the frame has passed its check. It returns false when the link
// failed.
func (l *Link) readHeader() (wire.Header, bool) {
	l.deadline()
	h, err := wire.ReadHeader(l.rd, &l.hdrR)
	if err != nil {
		if l.open != nil && errors.Is(err, wire.ErrMalformed) {
			// The peer's writer only sends headers that parse.
			l.integrityFailed(l.open.ctr, fmt.Sprintf("a header that does not parse: %v", err))
		} else {
			l.readFailed(err)
		}
		return h, false
	}
	if l.open == nil {
		return h, true
	}
	if why := l.tooLong(&h); why != "" {
		// Nothing of the frame is read: its payload and tag would be
		// waited for, and never come whole, had the length grown on the
		// path; so the length is refused at once, the frame unread.
		l.refusedUnread(l.open.ctr, why)
		return h, false
	}
	n := int(h.Len) + TagSize
	if n > len(l.scratch) {
		l.scratch = make([]byte, n) // a peer with a larger chunk; grows once
	}
	sealed := l.scratch[:n]
	if err := l.readFull(sealed); err != nil {
		l.readFailed(err)
		return h, false
	}
	body, ok := l.open.open(l.hdrR[:], sealed)
	if !ok {
		l.integrityFailed(l.open.ctr-1, "tag mismatch")
		return h, false
	}
	l.body = body
	return h, true
}

// tooLong says why data frame h on a sealed link cannot be what the
// peer's writer sent ("" when it may be): its header declares more payload
// than remains of the message it continues, which an honest writer never
// does (it splits a message into frames that fit it exactly). What this
// rank knows before the payload: an eager frame's own message size (its
// Desc's count), the rest of an eager message or of a posted receive
// whose call and message number the header repeats. A header whose call
// differs is left to the check and the comparison after it (a mismatch is
// only named from a checked header). Control frames' lengths are bounded
// by wire.ParseHeader.
func (l *Link) tooLong(h *wire.Header) string {
	if h.Type != wire.TypeData {
		return ""
	}
	if h.Desc.Collective == wire.Eager {
		if dt := reduce.DType(h.Desc.DType); dt.Valid() && h.Desc.Count <= MaxEager/uint64(dt.Size()) {
			if size := int(h.Desc.Count) * dt.Size(); !h.FitsMessage(size) {
				return fmt.Sprintf("its header declares %d payload bytes for an eager message of %d", h.Len, size)
			}
		}
	}
	e := l.expect
	if !e.set && h.Desc.Collective != wire.Eager {
		// The read loop takes the posted receive for this frame next
		// anyway; taken now, its size bounds the frame before a byte of
		// the payload is waited for.
		select {
		case l.pending = <-l.posts:
			l.hasPending = true
			e = frameExpect{desc: l.pending.Desc, seq: l.recvSeq, rest: len(l.pending.Buf), set: true}
		default:
		}
	}
	if e.set && h.Desc == e.desc && h.Seq == e.seq && !h.FitsMessage(e.rest) {
		return fmt.Sprintf("its header declares %d payload bytes where %d remain of message %d of %s, which it continues (or the two ranks planned the call differently)",
			h.Len, e.rest, e.seq, l.describe(&e.desc))
	}
	return ""
}

// integrityFailed fails the mesh for frame number frame that failed its
// check on a sealed link, naming the link both ways.
func (l *Link) integrityFailed(frame uint64, why string) {
	l.failSealed(frame, why, false)
}

// refusedUnread fails the mesh for frame number frame whose header (see
// tooLong) declares a length the peer cannot have sent: the frame is not
// read, so its tag is never checked.
func (l *Link) refusedUnread(frame uint64, why string) {
	l.failSealed(frame, why, true)
}

func (l *Link) failSealed(frame uint64, why string, unread bool) {
	me := l.mesh.id.Rank
	ie := &IntegrityError{Local: me, Peer: l.peer, Channel: l.channel, Frame: frame, Why: why, Unread: unread,
		LocalAddr: addrOf(l.conn.LocalAddr()), PeerAddr: addrOf(l.conn.RemoteAddr())}
	// The Detail travels in the aborts and the flight recorder's dumps,
	// so every rank's error and `ringtail debug analyze` name the link.
	l.mesh.fail(&Error{Kind: KindIntegrity, Rank: l.peer, Reporter: me, Local: me, Detail: ie.Error(), Err: ie})
}

func addrOf(a net.Addr) string {
	if a == nil {
		return "?"
	}
	return a.String()
}

// readControl reads the payload of a control frame; false when the link
// failed.
func (l *Link) readControl(h *wire.Header) ([]byte, bool) {
	if l.open != nil {
		return bytes.Clone(l.body), true // checked by readHeader; body's memory is reused
	}
	p := make([]byte, h.Len)
	if err := l.readFull(p); err != nil {
		l.readFailed(err)
		return nil, false
	}
	return p, true
}

func (l *Link) readLoop() {
	var (
		cur  RecvReq
		have bool
		got  int
	)
	for {
		if l.open != nil {
			l.expect = frameExpect{}
			if have {
				l.expect = frameExpect{desc: cur.Desc, seq: l.recvSeq, rest: len(cur.Buf) - got, set: true}
			}
		}
		h, ok := l.readHeader()
		if !ok {
			return
		}
		switch h.Type {
		case wire.TypeHeartbeat:
			continue
		case wire.TypeAbort:
			p, ok := l.readControl(&h)
			if !ok {
				return
			}
			a, err := wire.ParseAbort(p)
			if err != nil {
				l.readFailed(err)
				return
			}
			e := &Error{Kind: Kind(a.Code), Rank: a.Culprit, Reporter: a.Origin, Local: l.mesh.id.Rank, Detail: a.Reason}
			close(l.peerAborted)
			if e.Kind == KindClosed && !have && !l.mesh.cfg.TolerateDeaths && l.markGone(e) {
				return // a clean close between collectives: fail only if this link is used again
			}
			if e.Rank != l.peer {
				// The peer's whole mesh failed because of another rank (it
				// only sends aborts from failAll): it takes part in nothing
				// any more, so this mesh fails too, blaming that rank, even
				// when deaths are tolerated — marking only the culprit dead
				// would leave the peer's closing link to be blamed next.
				l.mesh.failAll(e)
				return
			}
			l.mesh.fail(e)
			return
		case wire.TypeQuery:
			p, ok := l.readControl(&h)
			if !ok {
				return
			}
			q, err := wire.ParseQuery(p)
			if err != nil {
				l.readFailed(err)
				return
			}
			l.mesh.answer(l, &q)
			continue
		case wire.TypeState:
			p, ok := l.readControl(&h)
			if !ok {
				return
			}
			st, err := wire.ParseState(p)
			if err != nil {
				l.readFailed(err)
				return
			}
			l.stateMu.Lock()
			l.state = st
			l.stateMu.Unlock()
			l.states.Add(1)
			l.mesh.ring()
			continue
		case wire.TypeData:
		default:
			l.readFailed(fmt.Errorf("%w: unexpected %v frame", wire.ErrMalformed, h.Type))
			return
		}
		if h.Desc.Collective == wire.Eager && !have {
			if !l.readEager(&h) {
				return
			}
			continue
		}
		if !have {
			if l.hasPending { // taken by readHeader (tooLong) for this frame
				cur, l.pending, l.hasPending = l.pending, RecvReq{}, false
			} else {
				select {
				case cur = <-l.posts:
				default:
					var ok bool
					if cur, ok = l.hold(&h.Desc); !ok {
						return
					}
				}
			}
			have, got = true, 0
		}
		if err := l.check(&cur, &h, got); err != nil {
			l.mesh.fail(err)
			return
		}
		n := int(h.Len)
		dst := cur.Buf[got : got+n]
		if !cur.Guard.enter() {
			return // the call failed and took its buffer back (Mesh.TakeBack)
		}
		if l.open != nil {
			// Read and checked whole by readHeader: only now applied.
			if !cur.Reduce {
				copy(dst, l.body)
			} else if err := reduce.Apply(dst, l.body, cur.DType, cur.Op); err != nil {
				cur.Guard.leave()
				l.mesh.fail(&Error{Kind: KindLocal, Rank: NoRank, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Err: err})
				return
			}
		} else if cur.Reduce && l.inPlace != nil {
			l.deadline()
			l.fold = inPlaceFold{dst: dst, dt: cur.DType, op: cur.Op}
			err := l.inPlace.ReadFunc(n, cur.DType.Size(), l.foldFn)
			rerr := l.fold.err
			l.fold = inPlaceFold{}
			if err != nil {
				cur.Guard.leave()
				l.readFailed(err)
				return
			}
			if rerr != nil {
				cur.Guard.leave()
				l.mesh.fail(&Error{Kind: KindLocal, Rank: NoRank, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Err: rerr})
				return
			}
		} else if cur.Reduce {
			if n > len(l.scratch) {
				l.scratch = make([]byte, n) // a peer with a larger chunk; grows once
			}
			src := l.scratch[:n]
			if err := l.readFull(src); err != nil {
				cur.Guard.leave()
				l.readFailed(err)
				return
			}
			if err := reduce.Apply(dst, src, cur.DType, cur.Op); err != nil {
				cur.Guard.leave()
				l.mesh.fail(&Error{Kind: KindLocal, Rank: NoRank, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Err: err})
				return
			}
		} else if err := l.readFull(dst); err != nil {
			cur.Guard.leave()
			l.readFailed(err)
			return
		}
		cur.Guard.leave()
		got += n
		l.rxFrames.Add(1)
		if got == len(cur.Buf) {
			cur.Done <- Result{Tag: cur.Tag}
			have = false
			l.recvSeq++
		}
	}
}

// hold waits for the receive that will take a data frame that arrived
// before it was posted. Meanwhile the frame's Desc is published (Held), so
// that an executor waiting on this peer's fastbox, or judging a stall, can
// see it; and every heldCheck the mesh judges whether this rank will ever
// post that receive (a rank that finished the frame's call without it
// never will: a mismatch). It returns false when the mesh failed.
func (l *Link) hold(d *Desc) (RecvReq, bool) {
	l.heldMu.Lock()
	l.held = *d
	l.heldMu.Unlock()
	l.holding.Store(true)
	defer l.holding.Store(false)
	if l.heldTimer == nil {
		l.heldTimer = time.NewTimer(heldCheck)
	} else {
		l.heldTimer.Reset(heldCheck)
	}
	defer l.heldTimer.Stop()
	for {
		select {
		case cur := <-l.posts:
			return cur, true
		case <-l.mesh.failed:
			return RecvReq{}, false
		case <-l.heldTimer.C:
			if e := l.mesh.judgeHeld(l, d); e != nil {
				l.mesh.fail(e)
				return RecvReq{}, false
			}
			l.heldTimer.Reset(heldCheck)
		}
	}
}

// Held returns the Desc of the data frame the reader holds for want of a
// posted receive, if any.
func (l *Link) Held() (Desc, bool) {
	if !l.holding.Load() {
		return Desc{}, false
	}
	l.heldMu.Lock()
	defer l.heldMu.Unlock()
	return l.held, l.holding.Load()
}

// readEager assembles an eager message that starts with header h and
// hands it to the mesh inbox: plain frames are read into the message's
// buffer, compressed ones (wire.FlagS2) decoded into it, so the inbox
// always holds the plain data. It returns false when the link failed.
func (l *Link) readEager(h *wire.Header) bool {
	me := l.mesh.id.Rank
	dt := reduce.DType(h.Desc.DType)
	size := uint64(dt.Size()) * h.Desc.Count
	if h.Seq != l.recvSeq || !dt.Valid() || size > MaxEager || !h.FitsMessage(int(size)) {
		l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me,
			Detail: fmt.Sprintf("bad eager message header from rank %d (seq %d, want %d; %d × %v; %d-byte frame)", l.peer, h.Seq, l.recvSeq, h.Desc.Count, dt, h.Len)})
		return false
	}
	buf := l.mesh.takeBuffer(int(size))
	for got, fh := 0, *h; ; {
		if fh.Flags&wire.FlagS2 != 0 {
			n, ok := l.readS2(&fh, buf[got:])
			if !ok {
				return false
			}
			got += n
		} else if l.open != nil {
			got += copy(buf[got:got+int(fh.Len)], l.body)
		} else {
			if err := l.readFull(buf[got : got+int(fh.Len)]); err != nil {
				l.readFailed(err)
				return false
			}
			got += int(fh.Len)
		}
		if got == len(buf) {
			break
		}
		l.expect = frameExpect{desc: h.Desc, seq: h.Seq, rest: len(buf) - got, set: true}
		next, ok := l.readHeader()
		for ok && next.Type == wire.TypeHeartbeat {
			next, ok = l.readHeader()
		}
		if !ok {
			return false
		}
		if next.Type != wire.TypeData || next.Desc != h.Desc || next.Seq != h.Seq {
			l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me, Detail: "eager message interrupted by another frame"})
			return false
		}
		if !next.FitsMessage(len(buf) - got) {
			l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me,
				Detail: fmt.Sprintf("eager frame of %d bytes (flags %#x) from rank %d where %d bytes remain of the message", next.Len, uint8(next.Flags), l.peer, len(buf)-got)})
			return false
		}
		fh = next
	}
	l.recvSeq++
	c := Eager{From: l.peer, Tag: h.Desc.Tag, DType: dt, Data: buf, Arrived: time.Now()}
	select {
	case l.mesh.inbox <- c:
		return true
	case <-l.mesh.failed:
		return false
	}
}

// readS2 reads a compressed eager frame (its header h fits the message:
// FitsMessage) and decodes it into the front of rest, the part of the
// message still to come. It returns the bytes decoded; false when the link
// failed (a corrupt block fails it with a protocol error naming the peer).
func (l *Link) readS2(h *wire.Header, rest []byte) (int, bool) {
	n := int(h.Len)
	src := l.body // read and checked by readHeader
	if l.open == nil {
		if len(l.zin) < n {
			l.zin = make([]byte, n) // bounded by wire.MaxS2Len of the message's rest
		}
		src = l.zin[:n]
		if err := l.readFull(src); err != nil {
			l.readFailed(err)
			return 0, false
		}
	}
	got, err := wire.DecodeS2(rest, src)
	if err != nil {
		me := l.mesh.id.Rank
		l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me, Err: err,
			Detail: fmt.Sprintf("corrupt compressed eager message from rank %d (tag %d)", l.peer, h.Desc.Tag)})
		return 0, false
	}
	return got, true
}

// check compares a data frame with the posted receive: the same call (every
// field of the Desc, the call number included), the link's next message,
// and no more bytes than expected.
func (l *Link) check(cur *RecvReq, h *wire.Header, got int) *Error {
	me := l.mesh.id.Rank
	if f := h.Desc.Diff(&cur.Desc); f != wire.FieldNone {
		return l.mismatch(&h.Desc, &cur.Desc, f, "")
	}
	if h.Seq != l.recvSeq {
		detail := fmt.Sprintf("rank %d sent its message %d on this link during %s, rank %d expected message %d: one of them skipped or added a message",
			l.peer, h.Seq, l.describe(&cur.Desc), me, l.recvSeq)
		return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: me, Local: me, Detail: detail}
	}
	if int(h.Len) > len(cur.Buf)-got {
		detail := fmt.Sprintf("rank %d sent %d bytes where %d remained of a %d-byte message in %s", l.peer, h.Len, len(cur.Buf)-got, len(cur.Buf), l.describe(&cur.Desc))
		return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: me, Local: me, Detail: detail}
	}
	return nil
}

// mismatch is the error for a peer whose call theirs differs from this
// rank's call mine in field f (why, when set, explains a difference that
// no field shows).
func (l *Link) mismatch(theirs, mine *Desc, f wire.Field, why string) *Error {
	me := l.mesh.id.Rank
	detail := fmt.Sprintf("rank %d called %s, rank %d called %s", l.peer, l.describe(theirs), me, l.describe(mine))
	if f != wire.FieldNone {
		detail += fmt.Sprintf(": they disagree on the %v", f)
	}
	if why != "" {
		detail += ": " + why
	}
	return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: me, Local: me, Detail: detail}
}

func (l *Link) describe(d *Desc) string { return d.Format(l.cfg.Names) }

func (l *Link) readFailed(err error) {
	e := &Error{Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank}
	switch {
	case isTimeout(err):
		e.Kind = KindSilent
		e.Detail = fmt.Sprintf("sent nothing, not even a heartbeat, for %v: dead or frozen", l.cfg.Silence)
	case errors.Is(err, wire.ErrMalformed):
		e.Kind, e.Err = KindProtocol, err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isReset(err):
		e.Kind = KindPeerDied
		e.Detail = "connection closed"
		e.Err = err
	default:
		e.Kind, e.Err = KindPeerDied, err
	}
	l.mesh.fail(e)
}

func (l *Link) lock() { l.wsem <- struct{}{} }

func (l *Link) unlock() { <-l.wsem }

func (l *Link) writeLoop() {
	tick := time.NewTicker(l.cfg.Heartbeat / 2)
	defer tick.Stop()
	l.lastWrite = time.Now()
	for {
		select {
		case req := <-l.sends:
			if !req.Claim.take() {
				continue // withdrawn by its sender
			}
			err := l.writeData(&req)
			req.Claim.release()
			if err != nil {
				l.writeFailed(err)
				return
			}
			req.Done <- Result{Tag: req.Tag}
		case c := <-l.ctrl:
			if err := l.writeControl(c.t, c.payload); err != nil {
				return // the reader or the executor reports the failure
			}
		case now := <-tick.C:
			if now.Sub(l.lastWrite) < l.cfg.Heartbeat {
				continue
			}
			if err := l.writeControl(wire.TypeHeartbeat, nil); err != nil {
				return
			}
		case <-l.mesh.failed:
			return
		}
	}
}

// writeFailed reports a broken write. A peer that failed first sent an
// Abort before it closed, and the Abort is in the stream this link's
// reader is reading: the reader gets a moment to deliver it (the true
// cause, naming the rank that failed first) before the peer is blamed for
// the broken write.
func (l *Link) writeFailed(err error) {
	if l.mesh.failingNow() {
		return
	}
	t := time.NewTimer(min(l.cfg.grace(), time.Second))
	defer t.Stop()
	select {
	case <-l.mesh.failed:
		return
	case <-t.C:
	}
	l.mesh.fail(&Error{Kind: KindPeerDied, Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Detail: "write failed", Err: err})
}

// writeControl writes one control frame between data frames (a nil
// payload: a bare header, the heartbeat).
func (l *Link) writeControl(t wire.Type, payload []byte) error {
	l.lock()
	var err error
	if payload == nil && l.seal == nil {
		h := wire.Header{Type: t}
		h.Put(l.hdrW[:])
		_, err = l.conn.Write(l.hdrW[:])
	} else {
		err = l.writeControlLocked(t, payload)
	}
	l.unlock()
	if err == nil {
		l.lastWrite = time.Now()
	}
	return err
}

// writeControlLocked writes one control frame in one write, sealed on a
// sealed link; the caller holds wsem.
func (l *Link) writeControlLocked(t wire.Type, payload []byte) error {
	if l.seal == nil {
		return wire.WriteControl(l.conn, t, payload)
	}
	if len(payload) > wire.MaxControlPayload {
		return fmt.Errorf("wire: %v payload of %d bytes exceeds limit %d", t, len(payload), wire.MaxControlPayload)
	}
	h := wire.Header{Type: t, Len: uint32(len(payload))}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+len(payload)+TagSize)
	h.Put(b)
	sealed, tagOnly := l.seal.seal(b, payload)
	if tagOnly {
		b = append(b, payload...)
	}
	_, err := l.conn.Write(append(b, sealed...))
	return err
}

// queue hands a control frame to the writer without blocking; a frame that
// finds the queue full is dropped (queries are repeated, and an answer to
// an older query is as good as a newer one).
func (l *Link) queue(t wire.Type, payload []byte) {
	select {
	case l.ctrl <- ctrlFrame{t, payload}:
	default:
	}
}

// Ask sends the peer a Query about the call d this rank waits in; its
// answer arrives as a State (see Answer).
func (l *Link) Ask(d *Desc) { l.queue(wire.TypeQuery, wire.MarshalQuery(d)) }

// Answer returns the peer's latest answer to a Query and how many answers
// had arrived when it was read.
func (l *Link) Answer() (wire.State, uint64) {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return l.state, l.states.Load()
}

// Answers returns how many answers to Queries have arrived.
func (l *Link) Answers() uint64 { return l.states.Load() }

func (l *Link) writeData(req *SendReq) error {
	buf, st := req.Buf, req.Compress
	if st != nil && (len(buf) == 0 || req.Desc.Collective != wire.Eager) {
		st = nil // only an eager message's frames go compressed
	}
	if st != nil {
		*st = SendStats{Plain: int64(len(buf))}
		if need := wire.MaxS2Len(min(req.Chunk, len(buf))); len(l.zout) < need {
			l.zout = make([]byte, need)
		}
	}
	for off := 0; ; {
		n := min(req.Chunk, len(buf)-off)
		h := wire.Header{Type: wire.TypeData, Channel: uint16(l.channel), Len: uint32(n), Seq: l.sendSeq, Desc: req.Desc}
		if !req.Guard.enter() {
			return revokedError{} // the call failed and took its buffer back
		}
		payload := buf[off : off+n]
		if st != nil {
			payload = l.compressFrame(&h, payload, st)
		}
		l.lock()
		h.Put(l.hdrW[:])
		l.bufArr = [3][]byte{l.hdrW[:], payload}
		l.bufs = l.bufArr[:2]
		tagAfter := false
		switch {
		case l.seal == nil:
		case l.seal.encrypt:
			l.bufArr[1], _ = l.seal.seal(l.hdrW[:], payload) // the payload encrypted, and the tag
		case len(payload) <= tagAfterBytes:
			l.bufArr[2], _ = l.seal.seal(l.hdrW[:], payload)
			l.bufs = l.bufArr[:3]
		default:
			tagAfter = true
		}
		_, err := l.bufs.WriteTo(l.conn) // writev on sockets
		if err == nil && tagAfter {
			// A large frame's tag is computed once header and payload
			// are in the socket's buffer, while they go out: off the
			// frame's path (the payload cannot change meanwhile: the
			// guard is held).
			tag, _ := l.seal.seal(l.hdrW[:], payload)
			_, err = l.conn.Write(tag)
		}
		l.bufArr = [3][]byte{}
		l.unlock()
		req.Guard.leave()
		if err != nil {
			return err
		}
		off += n
		if off >= len(buf) {
			break
		}
		if l.mesh.failingNow() {
			return errors.New("communicator failed")
		}
	}
	l.lastWrite = time.Now()
	l.sendSeq++
	return nil
}

// compressFrame encodes one frame's plain payload as an s2 block into
// l.zout: when that is smaller it marks h (FlagS2, the block's length) and
// returns the block, else the plain payload; st records the cost.
func (l *Link) compressFrame(h *wire.Header, plain []byte, st *SendStats) []byte {
	t0 := time.Now()
	z := wire.EncodeS2(l.zout, plain)
	st.Encode += time.Since(t0)
	st.Frames++
	payload := plain
	if len(z) < len(plain) {
		h.Flags, h.Len, payload = wire.FlagS2, uint32(len(z)), z
		st.Compressed++
	}
	st.Wire += int64(len(payload))
	return payload
}

// abort sends an Abort frame (waiting at most grace for the writer to reach
// a frame boundary) and half-closes the connection.
func (l *Link) abort(a *wire.AbortError, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-l.peerAborted:
	case l.wsem <- struct{}{}:
		_ = l.conn.SetWriteDeadline(time.Now().Add(grace))
		_ = l.writeControlLocked(wire.TypeAbort, a.Marshal())
		l.unlock()
	case <-t.C:
	}
	closeWrite(l.conn)
}

// markGone records that the peer closed its communicator cleanly. It
// returns false when a receive is already posted (the peer left in the
// middle of a collective), in which case the caller fails the mesh.
func (l *Link) markGone(e *Error) bool {
	l.postMu.Lock()
	defer l.postMu.Unlock()
	if len(l.posts) > 0 {
		return false
	}
	l.peerGone = e
	return true
}

// gone returns what markGone recorded, or nil.
func (l *Link) gone() *Error {
	l.postMu.Lock()
	defer l.postMu.Unlock()
	return l.peerGone
}

// useGone is a use of a link whose peer has gone: it fails the mesh with
// what markGone recorded (a tolerant mesh marks the peer dead instead) and
// returns the error the caller reports.
func (l *Link) useGone(gone *Error) error {
	l.mesh.fail(gone)
	if e := l.mesh.DeadErr(l.peer); e != nil {
		return e
	}
	return l.mesh.Err()
}

// Send posts a send request; it completes in order on the request's Done
// channel. It fails if the peer is dead or has closed its communicator.
func (l *Link) Send(req SendReq, cancel <-chan struct{}) error {
	return post(l, l.sends, req, cancel)
}

// Recv posts a receive request, matched in order with the peer's messages.
// It fails if the peer is dead or has closed its communicator.
func (l *Link) Recv(req RecvReq, cancel <-chan struct{}) error {
	return post(l, l.posts, req, cancel)
}

// post queues req on one of the link's request channels, under postMu so
// that it is ordered against markGone.
func post[R SendReq | RecvReq](l *Link, ch chan<- R, req R, cancel <-chan struct{}) error {
	l.postMu.Lock()
	defer l.postMu.Unlock()
	if e := l.mesh.DeadErr(l.peer); e != nil {
		return e
	}
	if l.peerGone != nil {
		return l.useGone(l.peerGone)
	}
	select {
	case ch <- req:
		return nil
	case <-l.mesh.failed:
		return l.mesh.Err()
	case <-cancel:
		return errCanceled
	}
}

// errCanceled is returned by Send and Recv when the caller's cancel
// channel closes first; the executor maps it to its context's error.
var errCanceled = errors.New("post canceled")

// IsCanceled reports whether err is a canceled post.
func IsCanceled(err error) bool { return errors.Is(err, errCanceled) }

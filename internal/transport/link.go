package transport

import (
	"bufio"
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

// Desc describes the collective call a data frame belongs to. Every Data
// frame carries it, so a receiver detects a peer making a different call.
// Seq is not set by callers: each link numbers its messages itself (per
// direction), which catches a skipped or extra message even when only some
// ranks take part in a call.
type Desc struct {
	Kind  uint8
	DType uint8
	RedOp uint8
	Root  uint32
	Count uint64
	Seq   uint32
}

func (d *Desc) header(channel, n int, seq uint32) wire.Header {
	return wire.Header{Type: wire.TypeData, Kind: d.Kind, DType: d.DType, RedOp: d.RedOp, Channel: uint16(channel),
		Seq: seq, Root: d.Root, Count: d.Count, Len: uint32(n)}
}

// KindContribution marks an eager message: the receiver does not match it
// with a posted receive but buffers it whole in the mesh's inbox (see
// Mesh.Inbox). Root carries the sender's tag (e.g. a training step).
const KindContribution uint8 = 0xC0

// MaxContribution bounds one contribution (the receiver allocates it).
const MaxContribution = 1 << 30

// Contribution is an eagerly received message.
type Contribution struct {
	From    int
	Tag     uint32
	DType   reduce.DType
	Data    []byte
	Arrived time.Time
}

// DescribeFunc renders a collective descriptor for error messages (the root
// package knows the names of collective kinds; this package does not).
type DescribeFunc func(Desc) string

// SendReq asks a link to send Buf as one message, split into frames of at
// most Chunk bytes (at least one frame, even when Buf is empty).
type SendReq struct {
	Desc  Desc
	Buf   []byte
	Chunk int
	Tag   int
	Done  chan<- Result
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
}

// Result reports a completed request by its Tag. Failures are not reported
// here: they fail the whole Mesh (see Mesh.Failed).
type Result struct{ Tag int }

// LinkConfig tunes liveness detection and buffers of every link.
type LinkConfig struct {
	// Silence is how long a peer may send nothing at all (not even a
	// heartbeat) before it is declared dead or frozen.
	Silence time.Duration
	// Heartbeat is how long a link may write nothing before it sends a
	// heartbeat; it must be well below Silence.
	Heartbeat time.Duration
	// Chunk is the expected frame size, used to size reduce scratch.
	Chunk int
	// Describe renders descriptors in mismatch errors (optional).
	Describe DescribeFunc
}

// Validate checks the link timings.
func (c LinkConfig) Validate() error {
	if c.Silence <= 0 || c.Heartbeat <= 0 {
		return fmt.Errorf("transport: silence %v and heartbeat %v must be positive", c.Silence, c.Heartbeat)
	}
	if c.Heartbeat*2 > c.Silence {
		return fmt.Errorf("transport: heartbeat %v must be at most half the silence timeout %v", c.Heartbeat, c.Silence)
	}
	if c.Chunk <= 0 || c.Chunk > wire.MaxDataPayload {
		return fmt.Errorf("transport: chunk %d outside 1..%d", c.Chunk, wire.MaxDataPayload)
	}
	return nil
}

// readPiece bounds one payload read between read-deadline refreshes, so a
// slow but live link is never mistaken for a silent one.
const readPiece = 256 << 10

// Link is one authenticated connection to a peer on one channel. Its
// reader goroutine owns br, hdrR, scratch; its writer goroutine owns hdrW
// and bufs; wsem serialises frames between the writer and an abort.
type Link struct {
	mesh    *Mesh
	peer    int
	channel int
	conn    net.Conn
	cfg     LinkConfig

	sends chan SendReq
	posts chan RecvReq
	wsem  chan struct{}

	fold    inPlaceFold             // the in-place reduction in progress (reader-owned)
	foldFn  func(off int, p []byte) // l.applyFold, bound once
	rd      io.Reader               // buffered socket, or the shared-memory conn itself
	inPlace inPlaceReader           // non-nil for shared memory: reduce without copying out
	hdrR    [wire.HeaderSize]byte
	scratch []byte

	hdrW      [wire.HeaderSize]byte
	bufs      net.Buffers
	bufArr    [2][]byte
	lastWrite time.Time
	sendSeq   uint32 // owned by the writer
	recvSeq   uint32 // owned by the reader

	// waiting describes a data frame the reader holds while no receive is
	// posted (kind | dtype<<8 | redop<<16 | 1<<24, and the count), or 0.
	waiting      atomic.Uint64
	waitingCount atomic.Uint64
	rxFrames     atomic.Uint64 // data frames received, for progress checks

	// postMu orders the executor's posts against a graceful close by the
	// peer: once peerGone is set, nothing more is posted to this link.
	postMu   sync.Mutex
	peerGone *Error
}

// inPlaceReader is implemented by connections whose received bytes can be
// read where they lie (shared memory).
type inPlaceReader interface {
	ReadFunc(n, unit int, f func(off int, p []byte)) error
}

func newLink(m *Mesh, peer, channel int, conn net.Conn, cfg LinkConfig) *Link {
	l := &Link{
		mesh: m, peer: peer, channel: channel, conn: conn, cfg: cfg,
		sends: make(chan SendReq, 64), posts: make(chan RecvReq, 64), wsem: make(chan struct{}, 1),
		bufs: make(net.Buffers, 0, 2),
	}
	l.foldFn = l.applyFold
	if ip, ok := conn.(inPlaceReader); ok {
		l.rd, l.inPlace = conn, ip
	} else {
		l.rd, l.scratch = bufio.NewReaderSize(conn, 64<<10), make([]byte, cfg.Chunk)
	}
	return l
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

func (l *Link) start(wg *sync.WaitGroup) {
	wg.Add(2)
	go func() { defer wg.Done(); l.readLoop() }()
	go func() { defer wg.Done(); l.writeLoop() }()
}

func (l *Link) deadline() { _ = l.conn.SetReadDeadline(time.Now().Add(l.cfg.Silence)) }

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

func (l *Link) readLoop() {
	var (
		cur  RecvReq
		have bool
		got  int
	)
	for {
		l.deadline()
		h, err := wire.ReadHeader(l.rd, &l.hdrR)
		if err != nil {
			l.readFailed(err)
			return
		}
		switch h.Type {
		case wire.TypeHeartbeat:
			continue
		case wire.TypeAbort:
			p := make([]byte, h.Len)
			if err := l.readFull(p); err != nil {
				l.readFailed(err)
				return
			}
			a, err := wire.ParseAbort(p)
			if err != nil {
				l.readFailed(err)
				return
			}
			e := &Error{Kind: Kind(a.Code), Rank: a.Culprit, Reporter: a.Origin, Local: l.mesh.id.Rank, Detail: a.Reason}
			if e.Kind == KindClosed && !have && !l.mesh.cfg.TolerateDeaths && l.markGone(e) {
				return // a clean close between collectives: fail only if this link is used again
			}
			l.mesh.fail(e)
			return
		case wire.TypeData:
		default:
			l.readFailed(fmt.Errorf("%w: unexpected %v frame", wire.ErrMalformed, h.Type))
			return
		}
		if h.Kind == KindContribution && !have {
			if !l.readContribution(&h) {
				return
			}
			continue
		}
		if !have {
			select {
			case cur = <-l.posts:
			default:
				// No receive posted yet: publish what is waiting, so an
				// executor spinning on this peer's fastbox for a smaller
				// message of "the same" call can report the mismatch.
				l.waiting.Store(uint64(h.Kind) | uint64(h.DType)<<8 | uint64(h.RedOp)<<16 | 1<<24)
				l.waitingCount.Store(h.Count)
				select {
				case cur = <-l.posts:
				case <-l.mesh.failed:
					return
				}
				l.waiting.Store(0)
			}
			have, got = true, 0
		}
		if err := l.check(&cur, &h, got); err != nil {
			l.mesh.fail(err)
			return
		}
		n := int(h.Len)
		dst := cur.Buf[got : got+n]
		if cur.Reduce && l.inPlace != nil {
			l.deadline()
			l.fold = inPlaceFold{dst: dst, dt: cur.DType, op: cur.Op}
			err := l.inPlace.ReadFunc(n, cur.DType.Size(), l.foldFn)
			rerr := l.fold.err
			l.fold = inPlaceFold{}
			if err != nil {
				l.readFailed(err)
				return
			}
			if rerr != nil {
				l.mesh.fail(&Error{Kind: KindLocal, Rank: NoRank, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Err: rerr})
				return
			}
		} else if cur.Reduce {
			if n > len(l.scratch) {
				l.scratch = make([]byte, n) // a peer with a larger chunk; grows once
			}
			src := l.scratch[:n]
			if err := l.readFull(src); err != nil {
				l.readFailed(err)
				return
			}
			if err := reduce.Apply(dst, src, cur.DType, cur.Op); err != nil {
				l.mesh.fail(&Error{Kind: KindLocal, Rank: NoRank, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Err: err})
				return
			}
		} else if err := l.readFull(dst); err != nil {
			l.readFailed(err)
			return
		}
		got += n
		l.rxFrames.Add(1)
		if got == len(cur.Buf) {
			cur.Done <- Result{Tag: cur.Tag}
			have = false
			l.recvSeq++
		}
	}
}

// readContribution assembles an eager message that starts with header h
// and hands it to the mesh inbox. It returns false when the link failed.
func (l *Link) readContribution(h *wire.Header) bool {
	me := l.mesh.id.Rank
	dt := reduce.DType(h.DType)
	size := uint64(dt.Size()) * h.Count
	if h.Seq != l.recvSeq || !dt.Valid() || size > MaxContribution || uint64(h.Len) > size {
		l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me,
			Detail: fmt.Sprintf("bad contribution header from rank %d (seq %d, want %d; %d × %v)", l.peer, h.Seq, l.recvSeq, h.Count, dt)})
		return false
	}
	buf := l.mesh.takeBuffer(int(size))
	for got, n := 0, int(h.Len); ; {
		if err := l.readFull(buf[got : got+n]); err != nil {
			l.readFailed(err)
			return false
		}
		got += n
		if got == len(buf) {
			break
		}
		l.deadline()
		next, err := wire.ReadHeader(l.rd, &l.hdrR)
		for err == nil && next.Type == wire.TypeHeartbeat {
			l.deadline()
			next, err = wire.ReadHeader(l.rd, &l.hdrR)
		}
		if err != nil {
			l.readFailed(err)
			return false
		}
		if next.Type != wire.TypeData || next.Kind != KindContribution || next.Seq != h.Seq || uint64(next.Len) > uint64(len(buf)-got) {
			l.mesh.fail(&Error{Kind: KindProtocol, Rank: l.peer, Reporter: me, Local: me, Detail: "contribution interrupted by another frame"})
			return false
		}
		n = int(next.Len)
	}
	l.recvSeq++
	c := Contribution{From: l.peer, Tag: h.Root, DType: dt, Data: buf, Arrived: time.Now()}
	select {
	case l.mesh.inbox <- c:
		return true
	case <-l.mesh.failed:
		return false
	}
}

// check compares a data frame with the posted receive: the same collective
// call (kind, type, op, root, count and sequence number) and no more bytes
// than expected.
func (l *Link) check(cur *RecvReq, h *wire.Header, got int) *Error {
	d := cur.Desc
	d.Seq = 0
	theirs := Desc{Kind: h.Kind, DType: h.DType, RedOp: h.RedOp, Root: h.Root, Count: h.Count}
	if theirs != d {
		detail := fmt.Sprintf("rank %d called %s, rank %d called %s", l.peer, l.describe(theirs), l.mesh.id.Rank, l.describe(d))
		return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Detail: detail}
	}
	if h.Seq != l.recvSeq {
		detail := fmt.Sprintf("rank %d sent its message %d on this link during %s, rank %d expected message %d: one of them skipped or added a call",
			l.peer, h.Seq, l.describe(d), l.mesh.id.Rank, l.recvSeq)
		return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Detail: detail}
	}
	if int(h.Len) > len(cur.Buf)-got {
		detail := fmt.Sprintf("rank %d sent %d bytes where %d remained of a %d-byte message in %s", l.peer, h.Len, len(cur.Buf)-got, len(cur.Buf), l.describe(d))
		return &Error{Kind: KindMismatch, Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Detail: detail}
	}
	return nil
}

func (l *Link) describe(d Desc) string {
	if l.cfg.Describe != nil {
		return l.cfg.Describe(d)
	}
	return fmt.Sprintf("%+v", d)
}

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
			if err := l.writeData(&req); err != nil {
				if !l.mesh.isFailed() {
					l.mesh.fail(&Error{Kind: KindPeerDied, Rank: l.peer, Reporter: l.mesh.id.Rank, Local: l.mesh.id.Rank, Detail: "write failed", Err: err})
				}
				return
			}
			req.Done <- Result{Tag: req.Tag}
		case now := <-tick.C:
			if now.Sub(l.lastWrite) < l.cfg.Heartbeat {
				continue
			}
			h := wire.Header{Type: wire.TypeHeartbeat}
			l.lock()
			h.Put(l.hdrW[:])
			_, err := l.conn.Write(l.hdrW[:])
			l.unlock()
			if err != nil {
				return // the reader or the executor reports the failure
			}
			l.lastWrite = now
		case <-l.mesh.failed:
			return
		}
	}
}

func (l *Link) writeData(req *SendReq) error {
	buf := req.Buf
	for off := 0; ; {
		n := min(req.Chunk, len(buf)-off)
		h := req.Desc.header(l.channel, n, l.sendSeq)
		l.lock()
		h.Put(l.hdrW[:])
		l.bufArr = [2][]byte{l.hdrW[:], buf[off : off+n]}
		l.bufs = l.bufArr[:]
		_, err := l.bufs.WriteTo(l.conn) // writev on sockets
		l.bufArr = [2][]byte{}
		l.unlock()
		if err != nil {
			return err
		}
		off += n
		if off >= len(buf) {
			break
		}
		if l.mesh.isFailed() {
			return errors.New("communicator failed")
		}
	}
	l.lastWrite = time.Now()
	l.sendSeq++
	return nil
}

// abort sends an Abort frame (waiting at most grace for the writer to reach
// a frame boundary) and half-closes the connection.
func (l *Link) abort(a *wire.AbortError, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case l.wsem <- struct{}{}:
		_ = l.conn.SetWriteDeadline(time.Now().Add(grace))
		_ = wire.WriteControl(l.conn, wire.TypeAbort, a.Marshal())
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

//go:build linux

package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shared-memory links. Two ranks on one host that already share an
// authenticated unix socket can move their frames through a pair of
// single-producer single-consumer rings in a memfd instead: the sender
// copies once into the ring and the receiver folds a reduction straight
// out of it (ReadFunc), where a socket costs two copies plus the fold.
// The unix socket stays as the doorbell (one byte wakes a sleeping side)
// and as the liveness signal: when the peer dies its end closes, and the
// ring reports end of stream once drained. The memfd has no name, so
// nothing can collide between jobs and nothing is left behind by kill -9.

// ShmRingSize is the capacity of each direction's ring.
const ShmRingSize = 4 << 20

const (
	shmCtrl    = 128 // control block: producer and consumer counters and flags, on separate cache lines
	doorData   = 'D'
	doorSpace  = 'S'
	shmOffer   = 'M'
	shmDecline = 'N'
)

// ring is a view of one direction's control block and data area.
type ring struct {
	head     *atomic.Uint64 // bytes produced (written by the producer)
	tail     *atomic.Uint64 // bytes consumed (written by the consumer)
	cWaiting *atomic.Uint32 // consumer asleep, wants a data doorbell
	pWaiting *atomic.Uint32 // producer asleep, wants a space doorbell
	data     []byte
}

func ringAt(mem []byte) ring {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	return ring{
		head:     (*atomic.Uint64)(base),
		tail:     (*atomic.Uint64)(unsafe.Add(base, 64)),
		cWaiting: (*atomic.Uint32)(unsafe.Add(base, 8)),
		pWaiting: (*atomic.Uint32)(unsafe.Add(base, 72)),
		data:     mem[shmCtrl : shmCtrl+ShmRingSize],
	}
}

// shmConn is a net.Conn over two rings and a doorbell socket.
type shmConn struct {
	sock    *net.UnixConn
	mem     []byte
	out     ring    // we produce
	in      ring    // we consume
	fastOut fastbox // small messages we send, driven by the executor
	fastIn  fastbox // small messages we receive
	local   bool    // the peer is a goroutine of this process (in-process ranks)

	dataBell  chan struct{} // a data doorbell arrived
	spaceBell chan struct{} // a space doorbell arrived
	peerGone  chan struct{} // the doorbell socket reached EOF or failed
	closed    chan struct{}
	closeOnce sync.Once
	life      sync.RWMutex // readers/writers hold R; Close takes W before unmapping

	bellMu sync.Mutex    // serialises doorbell writes
	bell   [1]byte       // doorbell byte, under bellMu
	rTimer *time.Timer   // owned by the reading goroutine
	grace  time.Duration // a read that times out re-checks for this long (setGrace)
	wTimer *time.Timer   // owned by the writing goroutine
	rdl    atomic.Int64
	wdl    atomic.Int64
}

var _ net.Conn = (*shmConn)(nil)

// upgradeShm turns an authenticated unix-socket connection into a shared-
// memory one. The dialer creates the memfd and offers it with SCM_RIGHTS;
// the acceptor maps it. Either side may decline (enabled=false), and then
// the socket is used as it is. A side that wants shared memory and cannot
// have it returns, with the socket, the reason (fallback): the mesh logs
// it and observability shows it, as such a link is several times slower.
func upgradeShm(c net.Conn, dialer, enabled bool) (conn net.Conn, fallback string, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, "", nil
	}
	_ = uc.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer uc.SetDeadline(time.Time{})
	size := shmSize
	if dialer {
		if !enabled {
			if _, err := uc.Write([]byte{shmDecline}); err != nil {
				return nil, "", err
			}
			return c, "", readShmAck(uc)
		}
		fd, err := unix.MemfdCreate("ringtail-link", unix.MFD_CLOEXEC)
		if err != nil {
			_, _ = uc.Write([]byte{shmDecline})
			return c, fmt.Sprintf("shared memory unavailable (memfd_create: %v)", err), readShmAck(uc)
		}
		defer unix.Close(fd)
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return nil, "", fmt.Errorf("shm: size memfd: %w", err)
		}
		mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, "", fmt.Errorf("shm: map memfd: %w", err)
		}
		if _, _, err := uc.WriteMsgUnix([]byte{shmOffer}, unix.UnixRights(fd), nil); err != nil {
			unix.Munmap(mem)
			return nil, "", fmt.Errorf("shm: offer memfd: %w", err)
		}
		var ack [1]byte
		if _, err := io.ReadFull(uc, ack[:]); err != nil {
			unix.Munmap(mem)
			return nil, "", fmt.Errorf("shm: read answer: %w", err)
		}
		if ack[0] != shmOffer {
			unix.Munmap(mem)
			return c, "shared memory declined by the peer (it could not map the segment: see its log)", nil
		}
		return newShmConn(uc, mem, true), "", nil
	}
	b := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b, oob)
	if err != nil || n != 1 {
		return nil, "", fmt.Errorf("shm: read offer: %w", errors.Join(err, io.ErrUnexpectedEOF))
	}
	if b[0] != shmOffer {
		if b[0] != shmDecline {
			return nil, "", fmt.Errorf("shm: unexpected byte %q in offer", b[0])
		}
		_, err := uc.Write([]byte{shmDecline})
		if enabled {
			fallback = "shared memory declined by the peer (it could not create the segment: see its log)"
		}
		return c, fallback, err
	}
	fd := -1
	why := "no file descriptor came with the offer"
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			fd = fds[0]
		}
	}
	var mem []byte
	if fd >= 0 {
		var st unix.Stat_t
		switch err := unix.Fstat(fd, &st); {
		case err != nil:
			why = fmt.Sprintf("fstat: %v", err)
		case st.Size != int64(size):
			why = fmt.Sprintf("the segment has %d bytes, want %d", st.Size, size)
		default:
			if mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
				why = fmt.Sprintf("mmap: %v", err)
			}
		}
		unix.Close(fd)
	}
	if mem == nil || !enabled {
		if mem != nil {
			unix.Munmap(mem)
		}
		_, err := uc.Write([]byte{shmDecline})
		if enabled {
			fallback = "shared memory unavailable (" + why + ")"
		}
		return c, fallback, err
	}
	if _, err := uc.Write([]byte{shmOffer}); err != nil {
		unix.Munmap(mem)
		return nil, "", err
	}
	return newShmConn(uc, mem, false), "", nil
}

func readShmAck(uc *net.UnixConn) error {
	var b [1]byte
	_, err := io.ReadFull(uc, b[:])
	return err
}

func newShmConn(uc *net.UnixConn, mem []byte, dialer bool) *shmConn {
	half := shmCtrl + ShmRingSize
	a, b := ringAt(mem[:half]), ringAt(mem[half:2*half])
	fa, fb := fastboxAt(mem[2*half:2*half+fastboxSpan]), fastboxAt(mem[2*half+fastboxSpan:])
	c := &shmConn{sock: uc, mem: mem, dataBell: make(chan struct{}, 1), spaceBell: make(chan struct{}, 1),
		peerGone: make(chan struct{}), closed: make(chan struct{}), rTimer: stoppedTimer(), wTimer: stoppedTimer(),
		local: peerPID(uc) == os.Getpid()}
	if dialer {
		c.out, c.in, c.fastOut, c.fastIn = a, b, fa, fb
	} else {
		c.out, c.in, c.fastOut, c.fastIn = b, a, fb, fa
	}
	go c.bells()
	return c
}

// bells reads doorbell bytes from the socket and wakes the waiting side.
func (c *shmConn) bells() {
	defer close(c.peerGone)
	buf := make([]byte, 64)
	for {
		n, err := c.sock.Read(buf)
		for _, b := range buf[:n] {
			ch := c.dataBell
			if b == doorSpace {
				ch = c.spaceBell
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func (c *shmConn) ring(b byte) {
	c.bellMu.Lock()
	c.bell[0] = b
	_, _ = c.sock.Write(c.bell[:])
	c.bellMu.Unlock()
}

var errShmTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "shm: i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }

// wait blocks until bell rings, the deadline passes, the peer goes or the
// conn closes. A spurious return is fine: callers re-check the ring. t is
// the calling side's reusable timer (the reader and the writer each own one).
func (c *shmConn) wait(bell chan struct{}, deadline *atomic.Int64, t *time.Timer) error {
	var timeout <-chan time.Time
	if d := deadline.Load(); d != 0 {
		left := time.Until(time.Unix(0, d))
		if left <= 0 {
			return errShmTimeout
		}
		t.Reset(left)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-bell:
		return nil
	case <-c.peerGone:
		return io.EOF
	case <-c.closed:
		return net.ErrClosed
	case <-timeout:
		return errShmTimeout
	}
}

// available blocks until at least need bytes can be read and returns how
// many can.
func (c *shmConn) available(need int) (int, error) {
	r := &c.in
	graced := false
	for {
		if n := int(r.head.Load() - r.tail.Load()); n >= need {
			return n, nil
		}
		r.cWaiting.Store(1)
		if n := int(r.head.Load() - r.tail.Load()); n >= need {
			r.cWaiting.Store(0)
			return n, nil
		}
		err := c.wait(c.dataBell, &c.rdl, c.rTimer)
		if err == errShmTimeout && !graced && c.grace > 0 {
			// The deadline passed: before blaming the peer, look again
			// for a grace, in case it was this process that was frozen
			// while the peer's heartbeats waited in the ring.
			graced = true
			c.rdl.Store(time.Now().Add(c.grace).UnixNano())
			r.cWaiting.Store(0)
			continue
		}
		if err != nil {
			r.cWaiting.Store(0)
			if n := int(r.head.Load() - r.tail.Load()); n >= need && (err == io.EOF || err == errShmTimeout) {
				return n, nil // what the peer wrote before it went, or while this rank was frozen
			}
			return 0, err
		}
	}
}

// consumed advances the tail and wakes a producer waiting for space.
func (c *shmConn) consumed(n int) {
	r := &c.in
	r.tail.Add(uint64(n))
	if r.pWaiting.Load() == 1 && r.pWaiting.CompareAndSwap(1, 0) {
		c.ring(doorSpace)
	}
}

func (c *shmConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return 0, net.ErrClosed
	}
	avail, err := c.available(1)
	if err != nil {
		return 0, err
	}
	n := min(avail, len(p))
	start := int(c.in.tail.Load() % ShmRingSize)
	k := copy(p[:n], c.in.data[start:])
	copy(p[k:n], c.in.data)
	c.consumed(n)
	return n, nil
}

// ReadFunc hands the next n bytes to f in place, in pieces that are whole
// multiples of unit bytes, without copying them out of shared memory (the
// reducing receive). n must be a multiple of unit, and unit must divide
// the ring size.
func (c *shmConn) ReadFunc(n, unit int, f func(off int, p []byte)) error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return net.ErrClosed
	}
	for off := 0; off < n; {
		avail, err := c.available(unit)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		start := int(c.in.tail.Load() % ShmRingSize)
		k := min(avail, n-off, ShmRingSize-start)
		k -= k % unit
		if k == 0 {
			// An element straddles the end of the ring (frames before it
			// were not a multiple of unit long): assemble it.
			var elem [16]byte
			e := elem[:unit]
			m := copy(e, c.in.data[start:])
			copy(e[m:], c.in.data)
			f(off, e)
			off += unit
			c.consumed(unit)
			continue
		}
		f(off, c.in.data[start:start+k])
		off += k
		c.consumed(k)
	}
	return nil
}

func (c *shmConn) Write(p []byte) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return 0, net.ErrClosed
	}
	r := &c.out
	written := 0
	for written < len(p) {
		free := ShmRingSize - int(r.head.Load()-r.tail.Load())
		if free == 0 {
			r.pWaiting.Store(1)
			if ShmRingSize-int(r.head.Load()-r.tail.Load()) > 0 {
				r.pWaiting.Store(0)
				continue
			}
			if err := c.wait(c.spaceBell, &c.wdl, c.wTimer); err != nil {
				r.pWaiting.Store(0)
				return written, err
			}
			continue
		}
		start := int(r.head.Load() % ShmRingSize)
		k := min(free, len(p)-written, ShmRingSize-start)
		copy(r.data[start:start+k], p[written:written+k])
		written += k
		r.head.Add(uint64(k))
		if r.cWaiting.Load() == 1 && r.cWaiting.CompareAndSwap(1, 0) {
			c.ring(doorData)
		}
	}
	return written, nil
}

func (c *shmConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Close wakes every waiter, closes the doorbell socket and, once no read
// or write is using the mapping, unmaps it.
func (c *shmConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.sock.Close()
		c.life.Lock()
		unix.Munmap(c.mem)
		c.life.Unlock()
	})
	return nil
}

// CloseWrite ends our direction: the peer drains what is in the ring,
// then reads end of stream.
func (c *shmConn) CloseWrite() error { return c.sock.CloseWrite() }

func (c *shmConn) LocalAddr() net.Addr  { return c.sock.LocalAddr() }
func (c *shmConn) RemoteAddr() net.Addr { return c.sock.RemoteAddr() }

func (c *shmConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *shmConn) SetReadDeadline(t time.Time) error {
	c.rdl.Store(unixNanoOrZero(t))
	c.poke(c.dataBell, t)
	return nil
}

func (c *shmConn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(unixNanoOrZero(t))
	c.poke(c.spaceBell, t)
	return nil
}

// poke wakes a waiter so it re-reads a deadline that is (nearly) due; a
// later deadline needs no wake-up, as waiters only ever extend their own.
func (c *shmConn) poke(bell chan struct{}, t time.Time) {
	if t.IsZero() || time.Until(t) > time.Millisecond {
		return
	}
	select {
	case bell <- struct{}{}:
	default:
	}
}

func unixNanoOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// setGrace sets how long a shared-memory read that timed out re-checks
// before it reports the timeout (see LinkConfig.Silence).
func setGrace(conn net.Conn, grace time.Duration) {
	if c, ok := conn.(*shmConn); ok {
		c.grace = grace
	}
}

// sever cuts a link to a dead peer without unmapping shared memory that an
// executor may still be polling: the doorbell socket closes (the reader
// sees end of stream); Close unmaps later.
func (l *Link) sever() {
	if c, ok := l.conn.(*shmConn); ok {
		c.sock.Close()
		return
	}
	l.conn.Close()
}

// peerPID returns the process at the other end of a unix socket, or -1.
func peerPID(uc *net.UnixConn) int {
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	pid := -1
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

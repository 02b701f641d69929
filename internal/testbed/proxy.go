package testbed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"golang.org/x/sys/unix"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// proxyMark is the firewall mark of the proxy's own outgoing connections,
// which the redirect rule lets pass.
const proxyMark = 0x72746264 // "rtbd"

// proxyTable is the nftables table of the redirect rules.
const proxyTable = "rtbed_proxy"

// proxy is the transparent TCP proxy of one host: it accepts the
// connections that nftables redirects to it in the host's namespace and
// pipes each through toxiproxy toxics to its original destination.
type proxy struct {
	ns   string
	ln   net.Listener
	link atomic.Pointer[Link]
	// stallUntil is the end of the current stall, in Unix nanoseconds.
	stallUntil atomic.Int64
	// flip is the armed byte flip (Bed.Flip), or nil.
	flip atomic.Pointer[flipArm]

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startProxy listens in namespace ns and installs the redirect rules.
func startProxy(ctx context.Context, b *Bed, ns string) (*proxy, error) {
	p := &proxy{ns: ns, conns: map[net.Conn]struct{}{}}
	p.link.Store(&Link{})
	err := inNetns(ns, func() error {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp4", "0.0.0.0:0")
		p.ln = ln
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("testbed: proxy listener in %s: %w", ns, err)
	}
	port := strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port)
	mark := strconv.Itoa(proxyMark)
	// Connections arriving on eth0 (except to the proxy itself) and
	// connections leaving by eth0 (except the proxy's own, marked) go to
	// the proxy. Only a connection's opening SYN is redirected: the nat
	// table turns connection tracking on in the namespace, which then
	// picks up connections already open mid-stream, and redirecting their
	// next segment to the proxy would reset them. They stay unproxied.
	syn := " tcp flags & (syn | ack) == syn"
	script := "table ip " + proxyTable + " {\n" +
		" chain pre { type nat hook prerouting priority dstnat; iifname \"eth0\" tcp dport != " + port + syn + " redirect to :" + port + "; }\n" +
		" chain out { type nat hook output priority -100; oifname \"eth0\" meta mark != " + mark + " meta l4proto tcp" + syn + " redirect to :" + port + "; }\n}\n"
	if err := b.runInput(ctx, script, "ip", "netns", "exec", ns, "nft", "-f", "-"); err != nil {
		p.ln.Close()
		return nil, err
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// inNetns runs fn on an OS thread switched into the named network
// namespace: sockets fn creates belong to it. The thread is switched back
// before it is released; if that fails, the thread ends with its goroutine.
func inNetns(ns string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the runtime ends this thread with the goroutine.
			done <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// setLink sets the delay and jitter of connections opened from now on.
func (p *proxy) setLink(l Link) { p.link.Store(&l) }

// stall holds all data for d from now.
func (p *proxy) stall(d time.Duration) { p.stallUntil.Store(time.Now().Add(d).UnixNano()) }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c.(*net.TCPConn))
		}()
	}
}

// track registers c for close; false once the proxy is closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// handle connects a redirected connection to its original destination
// and pipes both directions until both end.
func (p *proxy) handle(client *net.TCPConn) {
	defer p.untrack(client)
	defer client.Close()
	dst, err := originalDst(client)
	if err != nil {
		return
	}
	var upstream net.Conn
	err = inNetns(p.ns, func() error {
		d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, proxyMark)
			}); err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("tcp4", dst.String())
		upstream = c
		return err
	})
	if err != nil {
		return // the client sees its connection close, as if refused
	}
	if !p.track(upstream) {
		upstream.Close()
		return
	}
	defer p.untrack(upstream)
	defer upstream.Close()
	up := upstream.(*net.TCPConn)
	_ = up.SetNoDelay(true)
	_ = client.SetNoDelay(true)
	l := *p.link.Load()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(client, up, l) })
	wg.Go(func() { p.pipe(up, client, l) })
	wg.Wait()
}

// pipe copies src to dst through the link's toxics: toxiproxy's latency
// toxic when the link has a delay, then the stall gate. When src ends,
// dst's write side is closed; when dst fails, both connections are.
func (p *proxy) pipe(src, dst *net.TCPConn, l Link) {
	var chain []*toxics.ToxicWrapper
	if l.Delay > 0 || l.Jitter > 0 {
		chain = append(chain, &toxics.ToxicWrapper{
			Toxic:      &toxics.LatencyToxic{Latency: l.Delay.Milliseconds(), Jitter: l.Jitter.Milliseconds()},
			Type:       "latency",
			Toxicity:   1,
			BufferSize: 1024,
		})
	}
	chain = append(chain, &toxics.ToxicWrapper{Toxic: &stallToxic{until: &p.stallUntil}, Type: "stall", Toxicity: 1})
	chain = append(chain, &toxics.ToxicWrapper{Toxic: &flipToxic{arm: &p.flip}, Type: "flip", Toxicity: 1})
	in := make(chan *stream.StreamChunk)
	last := in
	for _, t := range chain {
		next := make(chan *stream.StreamChunk, t.BufferSize)
		stub := toxics.NewToxicStub(last, next)
		go stub.Run(t)
		last = next
	}
	go func() {
		_, _ = io.Copy(stream.NewChanWriter(in), src)
		close(in)
	}()
	_, err := io.Copy(dst, stream.NewChanReader(last))
	if err != nil {
		// dst is gone: end both connections, then drain what is still
		// in the toxics so that their goroutines finish.
		src.Close()
		dst.Close()
		for range last {
		}
		return
	}
	_ = dst.CloseWrite()
}

// stallToxic is a toxiproxy toxic that holds every chunk until the
// proxy's stall ends.
type stallToxic struct{ until *atomic.Int64 }

// Pipe implements toxics.Toxic.
func (t *stallToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			for {
				wait := time.Until(time.Unix(0, t.until.Load()))
				if wait <= 0 {
					break
				}
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
				case <-stub.Interrupt:
					timer.Stop()
					stub.Output <- c
					return
				}
			}
			stub.Output <- c
		}
	}
}

// flipArm is one armed flip: the byte After bytes on from the moment a
// data-plane stream first sees the arm is flipped, in the first stream
// that gets there; Done is closed then.
type flipArm struct {
	after int64
	taken atomic.Bool
	done  chan struct{}
}

// flipToxic is a toxiproxy toxic that flips one bit of one byte of a
// ringtail data-plane stream when its proxy has a flip armed. A stream is
// a data-plane one when it opens with a Hello frame (the dialer's side of
// a link: control-plane and other streams are left alone).
type flipToxic struct {
	arm *atomic.Pointer[flipArm]
}

// Pipe implements toxics.Toxic.
func (t *flipToxic) Pipe(stub *toxics.ToxicStub) {
	var (
		pos, base int64
		first     = true
		data      bool
		seen      *flipArm
	)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if first && len(c.Data) > 0 {
				first, data = false, c.Data[0] == byte(wire.TypeHello)
			}
			if a := t.arm.Load(); data && a != nil && !a.taken.Load() {
				if seen != a {
					seen, base = a, pos
				}
				if at := base + a.after - pos; at >= 0 && at < int64(len(c.Data)) && a.taken.CompareAndSwap(false, true) {
					c.Data[at] ^= 0x10
					close(a.done)
				}
			}
			pos += int64(len(c.Data))
			stub.Output <- c
		}
	}
}

// originalDst returns where a redirected connection was going
// (SO_ORIGINAL_DST).
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		// The kernel returns a sockaddr_in; x/sys/unix has no getter for
		// it, and IPv6Mreq is a 20-byte buffer that holds one.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		b := m.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), binary.BigEndian.Uint16(b[2:4]))
	})
	if err == nil {
		err = serr
	}
	return dst, err
}

// close stops accepting, closes every connection and waits for the
// goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

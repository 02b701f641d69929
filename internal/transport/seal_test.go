package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// tcpNetwork is the socket network with TCP even within this host, so
// its links are sealed as links between hosts are.
func tcpNetwork(t *testing.T) *Sockets {
	t.Helper()
	s, err := NewSockets(SocketsConfig{DisableUnix: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rogue is rank 1 of a two-rank job over TCP, written by hand: it
// authenticates like a rank (its frame keys in hand) and then writes
// whatever a test gives it; what rank 0 sends it is in got.
type rogue struct {
	conn net.Conn
	seal *sealer // rank 1's sending direction
	open *sealer // rank 0's sending direction, to read what rank 0 sent
	got  chan []byte
}

// frame encodes one sealed frame: header h, then the payload (plain or
// encrypted) and the tag.
func (r *rogue) frame(h wire.Header, payload []byte) []byte {
	b := make([]byte, wire.HeaderSize)
	h.Len = uint32(len(payload))
	h.Put(b)
	sealed, tagOnly := r.seal.seal(b, payload)
	if tagOnly {
		b = append(b, payload...)
	}
	return append(b, sealed...)
}

// rogueTCPMesh forms rank 0's mesh over TCP with protection mode against
// a hand-written rank 1 and returns both; edit changes rank 0's
// configuration.
func rogueTCPMesh(t *testing.T, mode FrameAuth, edit ...func(*MeshConfig)) (*Mesh, *rogue) {
	t.Helper()
	network := tcpNetwork(t)
	ln0, ln1 := listenTwo(t, network)
	t.Cleanup(func() { ln0.Close(); ln1.Close() })
	id := func(rank int) Identity {
		return Identity{JobID: "job", Rank: rank, World: 2, Secret: []byte("0123456789abcdef"), Frames: mode}
	}
	ready := make(chan *rogue, 1)
	go func() {
		c, err := ln1.Accept()
		if err != nil {
			close(ready)
			return
		}
		_, keys, err := AcceptHandshake(context.Background(), c, id(1))
		if err != nil {
			c.Close()
			close(ready)
			return
		}
		r := &rogue{conn: c, got: make(chan []byte, 1)}
		enc := mode == FrameAuthEncrypt
		r.seal, _ = newSealer(&keys.send, enc)
		r.open, _ = newSealer(&keys.recv, enc)
		go func() { // keep what rank 0 writes, so its writer never blocks
			all, _ := io.ReadAll(c)
			r.got <- all
		}()
		ready <- r
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := MeshConfig{
		Identity: id(0), Channels: 1, Network: network, Listener: ln0,
		Endpoints: []Endpoint{ln0.Endpoint(), ln1.Endpoint()}, Logger: zerolog.Nop(),
		Link: LinkConfig{Silence: 30 * time.Second, Heartbeat: 5 * time.Second, Chunk: 4096},
	}
	for _, f := range edit {
		f(&cfg)
	}
	m, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	r := <-ready
	if r == nil {
		t.Fatal("rank 1 did not authenticate")
	}
	t.Cleanup(func() { r.conn.Close() })
	if l := m.Link(1, 0); (l.seal != nil) != (mode != FrameAuthOff) || (l.open != nil) != (mode != FrameAuthOff) {
		t.Fatalf("link sealed = %v with protection %v", l.seal != nil, mode)
	}
	return m, r
}

// f32 encodes float32 values.
func f32(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// allreduceDesc is the Desc of the frames of an allreduce of count
// float32s.
func allreduceDesc(count int) wire.Desc {
	return wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Count: uint64(count), Call: 1}
}

// Frames that were changed, replayed, reordered or cut on the path fail
// rank 0 with an integrity error that names the link (both ranks, the
// channel, both addresses) and the peer, and nothing of the failing frame
// reaches the receive's buffer; a frame as sent is folded in.
func TestTamperedFramesFailNamingTheLinkAndApplyNothing(t *testing.T) {
	const count = 8 // two frames of four floats
	d := allreduceDesc(count)
	first, second := f32(1, 2, 3, 4), f32(5, 6, 7, 8)
	hdr := wire.Header{Type: wire.TypeData, Desc: d}
	type stream func(r *rogue) []byte
	both := func(r *rogue) ([]byte, []byte) { return r.frame(hdr, first), r.frame(hdr, second) }
	flip := func(b []byte, i int) []byte { b[i] ^= 0x01; return b }
	// A length that grew on the path (bit 8 or 16 of the header's
	// length field) is refused at once, unread, where the receiver knows
	// the most the peer can have sent: before, it waited for bytes that
	// never came and blamed a silent peer.
	grow := func(b []byte, bit uint) []byte { b[4+bit/8] ^= 1 << (bit % 8); return b }
	eager := func(count int) wire.Header {
		return wire.Header{Type: wire.TypeData, Desc: wire.Desc{Collective: wire.Eager, DType: uint8(reduce.Float32), Tag: 3, Count: uint64(count)}}
	}
	cases := []struct {
		name    string
		stream  stream
		applied int // frames of the message applied before the failure
		mode    FrameAuth
		unread  bool // refused before its payload was read
	}{
		{"payload byte", func(r *rogue) []byte { a, _ := both(r); return flip(a, wire.HeaderSize+5) }, 0, FrameAuthTag, false},
		{"header byte (the count)", func(r *rogue) []byte { a, _ := both(r); return flip(a, 16+24) }, 0, FrameAuthTag, false},
		{"header that does not parse (the type)", func(r *rogue) []byte { a, _ := both(r); a[0] = 0x7f; return a }, 0, FrameAuthTag, false},
		{"tag byte", func(r *rogue) []byte { a, _ := both(r); return flip(a, len(a)-1) }, 0, FrameAuthTag, false},
		{"second frame's payload", func(r *rogue) []byte { a, b := both(r); return append(a, flip(b, wire.HeaderSize)...) }, 1, FrameAuthTag, false},
		{"replayed frame", func(r *rogue) []byte { a, _ := both(r); return append(a, a...) }, 1, FrameAuthTag, false},
		{"reordered frames", func(r *rogue) []byte { a, b := both(r); return append(b, a...) }, 0, FrameAuthTag, false},
		{"dropped frame", func(r *rogue) []byte { _, b := both(r); return b }, 0, FrameAuthTag, false},
		{"truncated tag", func(r *rogue) []byte { a, b := both(r); return append(a[:len(a)-1], b...) }, 0, FrameAuthTag, false},
		{"heartbeat with a bad tag", func(r *rogue) []byte {
			return flip(r.frame(wire.Header{Type: wire.TypeHeartbeat}, nil), wire.HeaderSize)
		}, 0, FrameAuthTag, false},
		{"encrypted payload byte", func(r *rogue) []byte { a, _ := both(r); return flip(a, wire.HeaderSize+5) }, 0, FrameAuthEncrypt, false},
		{"encrypted, header byte", func(r *rogue) []byte { a, _ := both(r); return flip(a, 8) }, 0, FrameAuthEncrypt, false},
		{"grown length, receive posted", func(r *rogue) []byte { a, _ := both(r); return grow(a, 16) }, 0, FrameAuthTag, true},
		{"grown length of the second frame", func(r *rogue) []byte { a, b := both(r); return append(a, grow(b, 8)...) }, 1, FrameAuthTag, true},
		{"grown length, encrypted", func(r *rogue) []byte { a, _ := both(r); return grow(a, 8) }, 0, FrameAuthEncrypt, true},
		{"grown length of an eager frame", func(r *rogue) []byte { return grow(r.frame(eager(4), f32(1, 2, 3, 4)), 8) }, 0, FrameAuthTag, true},
		{"grown length of an eager message's second frame", func(r *rogue) []byte {
			h := eager(1004)
			h.Desc.Count = 1004 // 4016 bytes: 4000 in the first frame, 16 in the second
			return append(r.frame(h, make([]byte, 4000)), grow(r.frame(h, f32(1, 2, 3, 4)), 8)...)
		}, 0, FrameAuthTag, true},
		{"grown length of a query", func(r *rogue) []byte {
			return grow(r.frame(wire.Header{Type: wire.TypeQuery}, wire.MarshalQuery(&d)), 8)
		}, 0, FrameAuthTag, false}, // a header that does not parse
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, r := rogueTCPMesh(t, c.mode)
			buf := f32(10, 10, 10, 10, 20, 20, 20, 20)
			done := make(chan Result, 1)
			if err := m.Link(1, 0).Recv(RecvReq{Desc: d, Buf: buf, Reduce: true, DType: reduce.Float32, Op: reduce.Sum, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := r.conn.Write(c.stream(r)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-m.Failed():
			case <-done:
				t.Fatal("the message was received")
			case <-time.After(20 * time.Second):
				t.Fatal("the bad frame was not detected")
			}
			e := m.Failure()
			var ie *IntegrityError
			if e.Kind != KindIntegrity || e.Rank != 1 || !errors.As(e, &ie) || !errors.Is(e, ErrIntegrity) {
				t.Fatalf("got %v (kind %v, rank %d), want an integrity error blaming rank 1", e, e.Kind, e.Rank)
			}
			local, peer := m.Link(1, 0).conn.LocalAddr().String(), m.Link(1, 0).conn.RemoteAddr().String()
			if ie.Unread != c.unread {
				t.Errorf("refused unread = %v (%v), want %v", ie.Unread, ie, c.unread)
			}
			if ie.Local != 0 || ie.Peer != 1 || ie.Channel != 0 || ie.LocalAddr != local || ie.PeerAddr != peer || ie.Frame > 2 {
				t.Fatalf("the error names %+v, want rank 1 -> rank 0 on channel 0, %s -> %s", ie, peer, local)
			}
			for _, want := range []string{"rank 1 to rank 0", "channel 0", peer + " -> " + local} {
				if !strings.Contains(e.Error(), want) {
					t.Errorf("%q does not say %q", e.Error(), want)
				}
			}
			m.Halt()
			want := f32(10, 10, 10, 10, 20, 20, 20, 20)
			if c.applied == 1 {
				want = f32(11, 12, 13, 14, 20, 20, 20, 20)
			}
			if !bytes.Equal(buf, want) {
				t.Fatalf("buffer %v after the failure, want %v", buf, want)
			}
		})
	}
}

// A rank that failed (here: it caught a changed frame) closes its
// sockets only after its peer has ended its stream, reading and
// discarding what the peer still sends: closing with unread data would
// reset the connection, and a reset can overtake the rank's abort (a
// proxy or middlebox drops what it still holds; the peer's writes fail
// before its reader reaches the abort). Without the lingering close the
// peer's write of data the failed rank never reads fails.
func TestAFailedRankClosesOnlyAfterItsPeerEndsItsStream(t *testing.T) {
	m, r := rogueTCPMesh(t, FrameAuthTag, func(c *MeshConfig) { c.AbortGrace = 2 * time.Minute })
	d := allreduceDesc(4)
	bad := r.frame(wire.Header{Type: wire.TypeData, Desc: d}, f32(1, 2, 3, 4))
	bad[wire.HeaderSize] ^= 1
	wrote := make(chan error, 1)
	go func() {
		// More than any socket buffers hold: rank 0 reads none of it.
		_, err := r.conn.Write(append(bad, make([]byte, 64<<20)...))
		if err == nil {
			err = r.conn.(*net.TCPConn).CloseWrite()
		}
		wrote <- err
	}()
	buf := f32(0, 0, 0, 0)
	if err := m.Link(1, 0).Recv(RecvReq{Desc: d, Buf: buf, Reduce: true, DType: reduce.Float32, Op: reduce.Sum, Done: make(chan Result, 1)}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the changed frame was not detected")
	}
	if e := m.Failure(); e.Kind != KindIntegrity {
		t.Fatalf("failed with %v, want an integrity failure", e)
	}
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("the peer's write failed: %v (the failed rank reset the connection)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the peer's write did not finish")
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return after the peer ended its stream")
	}
	// What rank 0 sent: its abort, naming the integrity failure, then
	// the end of its stream.
	got := <-r.got
	if !bytes.Contains(got, []byte("integrity")) {
		t.Errorf("the peer did not get the abort (%d bytes)", len(got))
	}
}

// The same frames, as sent, are folded in: the check passes what it
// should (in both protections), and an eager message arrives whole.
func TestSealedFramesAsSentAreApplied(t *testing.T) {
	for _, mode := range []FrameAuth{FrameAuthTag, FrameAuthEncrypt} {
		t.Run(mode.String(), func(t *testing.T) {
			m, r := rogueTCPMesh(t, mode)
			const count = 8
			d := allreduceDesc(count)
			hdr := wire.Header{Type: wire.TypeData, Desc: d}
			buf := f32(10, 10, 10, 10, 20, 20, 20, 20)
			done := make(chan Result, 1)
			if err := m.Link(1, 0).Recv(RecvReq{Desc: d, Buf: buf, Reduce: true, DType: reduce.Float32, Op: reduce.Sum, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			eager := wire.Header{Type: wire.TypeData, Seq: 1, Desc: wire.Desc{Collective: wire.Eager, DType: uint8(reduce.Float32), Tag: 7, Count: 2}}
			stream := append(r.frame(hdr, f32(1, 2, 3, 4)), r.frame(wire.Header{Type: wire.TypeHeartbeat}, nil)...)
			stream = append(stream, r.frame(hdr, f32(5, 6, 7, 8))...)
			stream = append(stream, r.frame(eager, f32(9, 10))...)
			if _, err := r.conn.Write(stream); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-m.Failed():
				t.Fatal(m.Err())
			case <-time.After(20 * time.Second):
				t.Fatal("message not received")
			}
			if want := f32(11, 12, 13, 14, 25, 26, 27, 28); !bytes.Equal(buf, want) {
				t.Fatalf("buffer %v, want %v", buf, want)
			}
			select {
			case e := <-m.Inbox():
				if !bytes.Equal(e.Data, f32(9, 10)) || e.From != 1 || e.Tag != 7 {
					t.Fatalf("eager message %v from %d tag %d", e.Data, e.From, e.Tag)
				}
			case <-m.Failed():
				t.Fatal(m.Err())
			case <-time.After(20 * time.Second):
				t.Fatal("eager message not received")
			}
		})
	}
}

// What rank 0 sends carries a tag that checks, its payload in the clear
// with integrity alone and not with encryption: a small frame (its tag in
// the frame's one write) and a large one (its tag written after it).
func TestSealedFramesOnTheWire(t *testing.T) {
	for _, size := range []int{512, 5 * tagAfterBytes / 2} {
		for _, mode := range []FrameAuth{FrameAuthTag, FrameAuthEncrypt, FrameAuthOff} {
			t.Run(fmt.Sprintf("%v/%d", mode, size), func(t *testing.T) { sealedFrameOnTheWire(t, mode, size) })
		}
	}
}

func sealedFrameOnTheWire(t *testing.T, mode FrameAuth, size int) {
	payload := bytes.Repeat([]byte("gradient"), size/8)
	m, r := rogueTCPMesh(t, mode)
	d := wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Uint8), Count: uint64(len(payload)), Call: 1}
	done := make(chan Result, 1)
	if err := m.Link(1, 0).Send(SendReq{Desc: d, Buf: payload, Chunk: len(payload), Done: done}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("send did not complete")
	}
	m.Close()
	var wireBytes []byte
	select {
	case wireBytes = <-r.got:
	case <-time.After(20 * time.Second):
		t.Fatal("rank 0 did not close")
	}
	inClear := bytes.Contains(wireBytes, payload)
	if inClear != (mode != FrameAuthEncrypt) {
		t.Fatalf("payload in the clear on the wire = %v with %v", inClear, mode)
	}
	if mode == FrameAuthOff {
		return
	}
	// Frames in order: the data frame checks and decodes to the
	// payload (heartbeats may come before it).
	for rest := wireBytes; len(rest) >= wire.HeaderSize; {
		h, err := wire.ParseHeader(rest)
		if err != nil {
			t.Fatal(err)
		}
		end := wire.HeaderSize + int(h.Len) + TagSize
		if len(rest) < end {
			t.Fatalf("%v frame cut short", h.Type)
		}
		sealed := bytes.Clone(rest[wire.HeaderSize:end])
		body, ok := r.open.open(rest[:wire.HeaderSize], sealed)
		if !ok {
			t.Fatalf("%v frame fails its check", h.Type)
		}
		if h.Type == wire.TypeData {
			if !bytes.Equal(body, payload) {
				t.Fatal("data frame decodes to another payload")
			}
			return
		}
		rest = rest[end:]
	}
	t.Fatal("no data frame on the wire")
}

// Ranks that protect frames across hosts differently are refused at the
// handshake, with a reason naming the setting.
func TestDifferentFrameProtectionIsRefused(t *testing.T) {
	network := tcpNetwork(t)
	var lns [2]Listener
	var eps [2]Endpoint
	for i := range lns {
		ln, err := network.Listen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i], eps[i] = ln, ln.Endpoint()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for r, mode := range []FrameAuth{FrameAuthTag, FrameAuthOff} {
		go func() {
			m, err := Connect(ctx, MeshConfig{
				Identity: Identity{JobID: "job", Rank: r, World: 2, Secret: []byte("0123456789abcdef"), Frames: mode},
				Channels: 1, Network: network, Listener: lns[r], Endpoints: eps[:], Logger: zerolog.Nop(),
				Link: LinkConfig{Silence: 10 * time.Second, Heartbeat: time.Second, Chunk: 4096},
			})
			if m != nil {
				m.Close()
			}
			if err != nil {
				cancel() // a refused rank never connects: the other would wait for it to the deadline
			}
			errs <- err
		}()
	}
	var all []string
	for range 2 {
		if err := <-errs; err != nil {
			all = append(all, err.Error())
		}
	}
	if !strings.Contains(strings.Join(all, "\n"), "frame protection integrity across hosts, this rank uses off") {
		t.Fatalf("errors %q do not name the different protections", all)
	}
}

// The keys of a link's two directions differ, both ends derive the same
// ones, and a new handshake (fresh nonces) gives new keys.
func TestFrameKeysPerDirectionAndLink(t *testing.T) {
	hello := wire.Hello{Rank: 0, Peer: 1, World: 2, JobTag: [wire.JobTagSize]byte{1}, Nonce: [wire.NonceSize]byte{2}}
	ln := [wire.NonceSize]byte{3}
	secret := []byte("0123456789abcdef")
	d, err := deriveKeys(secret, &hello, &ln, true)
	if err != nil {
		t.Fatal(err)
	}
	l, err := deriveKeys(secret, &hello, &ln, false)
	if err != nil {
		t.Fatal(err)
	}
	if d.send != l.recv || d.recv != l.send || d.send == d.recv {
		t.Fatal("the two ends' keys do not pair up per direction")
	}
	ln[0] = 4
	again, _ := deriveKeys(secret, &hello, &ln, true)
	if again.send == d.send || again.recv == d.recv {
		t.Fatal("a new listener nonce gave the same keys")
	}
	hello.Channel = 1
	other, _ := deriveKeys(secret, &hello, &ln, true)
	if other.send == again.send {
		t.Fatal("another channel gave the same key")
	}
}

// BenchmarkSeal is the sender's cost of one 1 MiB frame (the default
// chunk) and the receiver's check: go test -run '^$' -bench Seal
// ./internal/transport/ (bytes/s in the ns/op's SetBytes column).
func BenchmarkSeal(b *testing.B) {
	var key [32]byte
	payload := make([]byte, 1<<20)
	hdr := make([]byte, wire.HeaderSize)
	for _, mode := range []FrameAuth{FrameAuthTag, FrameAuthEncrypt} {
		enc := mode == FrameAuthEncrypt
		b.Run(mode.String()+"/seal", func(b *testing.B) {
			s, err := newSealer(&key, enc)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				s.seal(hdr, payload)
			}
		})
		b.Run(mode.String()+"/open", func(b *testing.B) {
			w, _ := newSealer(&key, enc)
			r, _ := newSealer(&key, enc)
			frames := make([][]byte, 64)
			for i := range frames {
				out, tagOnly := w.seal(hdr, payload)
				if tagOnly {
					frames[i] = append(bytes.Clone(payload), out...)
				} else {
					frames[i] = bytes.Clone(out)
				}
			}
			b.SetBytes(int64(len(payload)))
			i := 0
			for b.Loop() {
				if i == len(frames) { // the counter moves on: reseal from the start
					b.StopTimer()
					w, r = func() (*sealer, *sealer) { a, _ := newSealer(&key, enc); c, _ := newSealer(&key, enc); return a, c }()
					for j := range frames {
						out, tagOnly := w.seal(hdr, payload)
						if tagOnly {
							frames[j] = append(frames[j][:0], payload...)
							frames[j] = append(frames[j], out...)
						} else {
							frames[j] = append(frames[j][:0], out...)
						}
					}
					i = 0
					b.StartTimer()
				}
				if _, ok := r.open(hdr, frames[i]); !ok {
					b.Fatal("frame fails its check")
				}
				i++
			}
		})
	}
}

// FuzzOpenSealedFrame: bytes from anywhere never panic a sealed link's
// check and never pass it (that would be a forgery), while what the
// sender seals, over any header and payload, passes and gives back the
// payload. go test -fuzz FuzzOpenSealedFrame ./internal/transport/
func FuzzOpenSealedFrame(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 4}, []byte("payload"), false)
	f.Add(make([]byte, wire.HeaderSize+TagSize), []byte{}, true)
	f.Fuzz(func(t *testing.T, frame, payload []byte, encrypt bool) {
		var key [32]byte
		key[0] = 7
		hdr := make([]byte, wire.HeaderSize)
		copy(hdr, frame)
		rest := bytes.Clone(frame[min(len(frame), wire.HeaderSize):])
		r, err := newSealer(&key, encrypt)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.open(hdr, rest); ok {
			t.Fatalf("%d bytes from nowhere passed the check", len(frame))
		}
		w, _ := newSealer(&key, encrypt)
		r, _ = newSealer(&key, encrypt)
		out, tagOnly := w.seal(hdr, payload)
		sealed := bytes.Clone(out)
		if tagOnly {
			sealed = append(bytes.Clone(payload), out...)
		}
		got, ok := r.open(hdr, sealed)
		if !ok || !bytes.Equal(got, payload) {
			t.Fatalf("a sealed frame of %d bytes: passed %v, payload equal %v", len(payload), ok, bytes.Equal(got, payload))
		}
	})
}

// listenTwo opens two listeners on network for a two-rank mesh.
func listenTwo(t *testing.T, network Network) (Listener, Listener) {
	t.Helper()
	var lns [2]Listener
	for i := range lns {
		ln, err := network.Listen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
	}
	return lns[0], lns[1]
}

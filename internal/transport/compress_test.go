package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// sparseGradient returns n float32s as bytes, nine in ten of them zero.
func sparseGradient(rng *rand.Rand, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		if rng.IntN(10) == 0 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		}
	}
	return b
}

// denseGradient returns n random float32s as bytes (incompressible).
func denseGradient(rng *rand.Rand, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	return b
}

// Compressed eager messages reach the receiver's inbox as the plain bytes
// over every transport: sparse ones compressed frame by frame, dense ones
// sent plain (no frame gets smaller), mixed ones partly; and the link's
// message numbering stays in step with plain traffic after them.
func TestConformanceCompressedEagerRoundTrips(t *testing.T) {
	const chunk = 16 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	sparse, dense := sparseGradient(rng, 100_000), denseGradient(rng, 20_000)
	mixed := append(sparseGradient(rng, 30_000), denseGradient(rng, 30_000)...)
	tiny := sparseGradient(rng, 3)
	msgs := []struct {
		name string
		data []byte
		// wantCompressed: every frame, none, or some
		every, none bool
	}{
		{"sparse", sparse, true, false},
		{"dense", dense, false, true},
		{"mixed", mixed, false, false},
		{"tiny", tiny, false, true},
		{"empty", nil, false, true},
	}
	for name, mk := range networks(t) {
		t.Run(name, func(t *testing.T) {
			network, shm := mk()
			tm, errs := formMesh(t, network, shm, 2, same(""), nil)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			done := make(chan Result, len(msgs)+2)
			stats := make([]SendStats, len(msgs))
			l01 := tm.meshes[0].Link(1, 0)
			for i, m := range msgs {
				d := Desc{Collective: wire.Eager, DType: uint8(reduce.Float32), Tag: uint32(i), Count: uint64(len(m.data) / 4)}
				if err := l01.Send(SendReq{Desc: d, Buf: m.data, Chunk: chunk, Tag: i, Done: done, Compress: &stats[i]}, nil); err != nil {
					t.Fatal(err)
				}
			}
			// A plain message after them: the numbering agrees.
			plainDesc := Desc{Collective: wire.PointToPoint, DType: uint8(reduce.Int32), Count: 5000, Call: 1}
			plain := denseGradient(rng, 5000)
			got := make([]byte, len(plain))
			if err := tm.meshes[1].Link(0, 0).Recv(RecvReq{Desc: plainDesc, Buf: got, Tag: 100, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			if err := l01.Send(SendReq{Desc: plainDesc, Buf: plain, Chunk: chunk, Tag: 101, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			for i := range msgs {
				select {
				case e := <-tm.meshes[1].Inbox():
					m := msgs[e.Tag]
					if int(e.Tag) != i || e.From != 0 || e.DType != reduce.Float32 || !bytes.Equal(e.Data, m.data) {
						t.Fatalf("message %d (%s): got tag %d from %d, %d bytes, equal %v", i, m.name, e.Tag, e.From, len(e.Data), bytes.Equal(e.Data, m.data))
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("message %d never arrived; mesh err %v", i, tm.meshes[1].Err())
				}
			}
			for seen := 0; seen < len(msgs)+2; seen++ {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%d of %d requests completed; mesh err %v", seen, len(msgs)+2, tm.meshes[1].Err())
				}
			}
			if !bytes.Equal(got, plain) {
				t.Fatal("the plain message after the compressed ones differs")
			}
			for i, m := range msgs {
				st := stats[i]
				if st.Plain != int64(len(m.data)) || st.Frames != (len(m.data)+chunk-1)/chunk {
					t.Errorf("%s: stats %+v for %d bytes", m.name, st, len(m.data))
				}
				switch {
				case m.every && (st.Compressed != st.Frames || st.Wire*3 > st.Plain):
					t.Errorf("%s: %d of %d frames compressed, %d wire bytes for %d", m.name, st.Compressed, st.Frames, st.Wire, st.Plain)
				case m.none && (st.Compressed != 0 || st.Wire != st.Plain):
					t.Errorf("%s: %d frames compressed, %d wire bytes for %d", m.name, st.Compressed, st.Wire, st.Plain)
				case !m.every && !m.none && (st.Compressed == 0 || st.Compressed == st.Frames):
					t.Errorf("%s: %d of %d frames compressed, want some", m.name, st.Compressed, st.Frames)
				}
			}
		})
	}
}

// rogueMesh forms rank 0's mesh with a rank 1 that authenticates and then
// writes what frames returns, and returns rank 0's mesh.
func rogueMesh(t *testing.T, frames []byte) *Mesh {
	t.Helper()
	network := NewInmem()
	ln0, _ := network.Listen(context.Background())
	ln1, _ := network.Listen(context.Background())
	eps := []Endpoint{ln0.Endpoint(), ln1.Endpoint()}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		c, err := ln1.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := AcceptHandshake(context.Background(), c, Identity{JobID: "job", Rank: 1, World: 2, Secret: []byte("s")}); err != nil {
			return
		}
		go func() { // drain what rank 0 writes (heartbeats), so its writer never blocks
			buf := make([]byte, 1<<16)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
		_, _ = c.Write(frames)
		<-stop
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := Connect(ctx, MeshConfig{
		Identity: Identity{JobID: "job", Rank: 0, World: 2, Secret: []byte("s")}, Channels: 1, Network: network,
		Listener: ln0, Endpoints: eps, Logger: zerolog.Nop(),
		Link: LinkConfig{Silence: 5 * time.Second, Heartbeat: time.Second, Chunk: 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// frame encodes one eager data frame of a message of count float32s.
func frame(flags wire.Flags, count int, payload []byte) []byte {
	h := wire.Header{Type: wire.TypeData, Flags: flags, Len: uint32(len(payload)),
		Desc: wire.Desc{Collective: wire.Eager, DType: uint8(reduce.Float32), Tag: 7, Count: uint64(count)}}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+len(payload))
	h.Put(b)
	return append(b, payload...)
}

// A corrupt, truncated or oversized compressed frame fails the receiver
// with a protocol error naming the sender, before any allocation the
// frame's lengths ask for beyond the message, and never panics.
func TestBadCompressedFramesAreProtocolErrorsNamingTheSender(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const count = 16 << 10
	data := sparseGradient(rng, count)
	block := wire.EncodeS2(nil, data)
	flipped := bytes.Clone(block)
	for i := len(flipped) / 3; i < len(flipped)/3+16; i++ {
		flipped[i] ^= 0xa5
	}
	bigger := wire.EncodeS2(nil, sparseGradient(rng, count+1))
	half := wire.EncodeS2(nil, data[:len(data)/2])
	cases := map[string]struct {
		frames []byte
		want   string // in the error
	}{
		"corrupt block":        {frame(wire.FlagS2, count, flipped), "corrupt compressed eager message from rank 1"},
		"truncated block":      {frame(wire.FlagS2, count, block[:len(block)-7]), "corrupt compressed eager message from rank 1"},
		"declares too much":    {frame(wire.FlagS2, count, bigger), "declares"},
		"frame too long":       {frame(wire.FlagS2, 4, make([]byte, wire.MaxS2Len(16)+1)), "bad eager message header from rank 1"},
		"second frame corrupt": {append(frame(wire.FlagS2, count, half), frame(wire.FlagS2, count, flipped)...), "corrupt compressed eager message from rank 1"},
		"second frame too long": {append(frame(wire.FlagS2, count, half), frame(wire.FlagS2, count, make([]byte, wire.MaxS2Len(len(data)/2)+1))...),
			"bytes remain of the message"},
		"flag on a collective's frame": {func() []byte {
			h := wire.Header{Type: wire.TypeData, Len: 4, Desc: wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), Count: 1}}
			b := make([]byte, wire.HeaderSize+4)
			h.Put(b)
			b[1] = byte(wire.FlagS2)
			return b
		}(), "only eager data frames may be compressed"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := rogueMesh(t, c.frames)
			select {
			case <-m.Failed():
				e := m.Failure()
				if e.Kind != KindProtocol || e.Rank != 1 || !strings.Contains(e.Error(), c.want) {
					t.Fatalf("got %v (kind %v, rank %d), want a protocol error on rank 1 containing %q", e, e.Kind, e.Rank, c.want)
				}
				if strings.Contains(c.want, "corrupt") && !errors.Is(e, wire.ErrMalformed) {
					t.Fatalf("%v does not wrap wire.ErrMalformed", e)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("bad frame not detected")
			}
			select {
			case msg := <-m.Inbox():
				t.Fatalf("a message of %d bytes was delivered", len(msg.Data))
			default:
			}
		})
	}
}

// The link that delivered a compressed message decodes it into the
// mailbox buffer and takes the next (plain) one normally: a good frame
// sequence from a hand-written peer.
func TestHandWrittenCompressedFramesDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const count = 8 << 10
	data := sparseGradient(rng, count)
	first, second := data[:len(data)/2], data[len(data)/2:]
	stream := append(frame(wire.FlagS2, count, wire.EncodeS2(nil, first)), frame(0, count, second)...)
	m := rogueMesh(t, stream)
	select {
	case e := <-m.Inbox():
		if !bytes.Equal(e.Data, data) || e.From != 1 || e.Tag != 7 {
			t.Fatalf("got %d bytes from %d tag %d, equal %v", len(e.Data), e.From, e.Tag, bytes.Equal(e.Data, data))
		}
	case <-m.Failed():
		t.Fatal(m.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("message never delivered")
	}
}

package wire

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
)

// sparse returns n bytes of float32-like data, nine words in ten zero.
func sparse(n int) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 40 {
		b[i], b[i+1], b[i+2], b[i+3] = byte(i), byte(i>>8), 0x3f, 0x80
	}
	return b
}

func TestCompressedHeaderGoldenBytes(t *testing.T) {
	h := Header{Type: TypeData, Flags: FlagS2, Len: 9, Seq: 1, Desc: Desc{Collective: Eager, DType: 7, Tag: 4, Count: 100}}
	var b [HeaderSize]byte
	h.Put(b[:])
	if b[1] != 1 {
		t.Fatalf("flags byte %d, want 1", b[1])
	}
	got, err := ParseHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestFlagsOnlyOnEagerDataFrames(t *testing.T) {
	cases := map[string]Header{
		"allreduce data":    {Type: TypeData, Flags: FlagS2, Len: 4, Desc: Desc{Collective: AllReduce}},
		"point-to-point":    {Type: TypeData, Flags: FlagS2, Len: 4, Desc: Desc{Collective: PointToPoint}},
		"heartbeat":         {Type: TypeHeartbeat, Flags: FlagS2},
		"abort":             {Type: TypeAbort, Flags: FlagS2, Len: 4},
		"unknown flag":      {Type: TypeData, Flags: 2, Len: 4, Desc: Desc{Collective: Eager}},
		"s2 and a stranger": {Type: TypeData, Flags: FlagS2 | 0x80, Len: 4, Desc: Desc{Collective: Eager}},
	}
	for name, h := range cases {
		var b [HeaderSize]byte
		h.Put(b[:])
		if _, err := ParseHeader(b[:]); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecodeS2RoundTripsIntoTheMessage(t *testing.T) {
	for _, n := range []int{0, 1, 17, 4 << 10, 1 << 20} {
		src := sparse(n)
		block := EncodeS2(make([]byte, MaxS2Len(n)), src)
		if n >= 4<<10 && len(block) >= n/4 {
			t.Errorf("%d sparse bytes compressed to %d", n, len(block))
		}
		dst := bytes.Repeat([]byte{0xaa}, n+8)
		got, err := DecodeS2(dst, block)
		if err != nil || got != n {
			t.Fatalf("%d bytes: decoded %d, %v", n, got, err)
		}
		if !bytes.Equal(dst[:n], src) || !bytes.Equal(dst[n:], bytes.Repeat([]byte{0xaa}, 8)) {
			t.Fatalf("%d bytes: decoded data differs, or bytes past the block were written", n)
		}
		h := Header{Type: TypeData, Flags: FlagS2, Len: uint32(len(block)), Desc: Desc{Collective: Eager}}
		if !h.FitsMessage(n) {
			t.Fatalf("%d bytes: a block of %d does not fit", n, len(block))
		}
	}
}

func TestDecodeS2RejectsBadBlocks(t *testing.T) {
	src := sparse(64 << 10)
	block := s2.Encode(nil, src)
	long := s2.Encode(nil, sparse(64<<10+1))
	padded := append(s2.Encode(nil, src[:100]), make([]byte, 4096)...)
	flipped := bytes.Clone(block)
	flipped[len(flipped)/2] ^= 0xff
	cases := map[string]struct {
		room  int
		block []byte
	}{
		"empty":                           {len(src), nil},
		"bad length varint":               {len(src), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		"declares more than remains":      {len(src), long},
		"declares 4 GiB":                  {len(src), []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0}},
		"truncated":                       {len(src), block[:len(block)/2]},
		"corrupt":                         {len(src), flipped},
		"trailing bytes past the block":   {len(src), padded},
		"declares a length, carries none": {len(src), []byte{0x10}},
	}
	for name, c := range cases {
		dst := make([]byte, c.room)
		n, err := DecodeS2(dst, c.block)
		if !errors.Is(err, ErrMalformed) || n != 0 {
			t.Errorf("%s: decoded %d, err %v; want ErrMalformed", name, n, err)
		}
	}
	h := Header{Type: TypeData, Flags: FlagS2, Len: uint32(MaxS2Len(100) + 1), Desc: Desc{Collective: Eager}}
	if h.FitsMessage(100) {
		t.Error("an s2 payload longer than MaxS2Len(remaining) fits")
	}
	h.Flags = 0
	if h.FitsMessage(100) || !h.FitsMessage(int(h.Len)) {
		t.Error("plain payloads fit by their length")
	}
}

// DecodeS2 decodes without allocating, and a block that declares more
// than the room is refused without allocating its declared size.
func TestDecodeS2DoesNotAllocate(t *testing.T) {
	block := s2.Encode(nil, sparse(1<<20))
	dst := make([]byte, 1<<20)
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := DecodeS2(dst, block); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per decode", allocs)
	}
	small := make([]byte, 10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		if _, err := DecodeS2(small, block); err == nil {
			t.Fatal("a 1 MiB block decoded into 10 bytes")
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("20 refusals allocated %d bytes", got)
	}
}

// FuzzDecodeS2: arbitrary blocks into a buffer of arbitrary room either
// fail with ErrMalformed, writing nothing past the room, or decode to at
// most the room; and whatever is encoded decodes back to itself.
func FuzzDecodeS2(f *testing.F) {
	f.Add(s2.Encode(nil, sparse(4096)), uint16(4096))
	f.Add(s2.Encode(nil, sparse(4096)), uint16(100))
	f.Add(s2.Encode(nil, []byte("plain text plain text plain text")), uint16(32))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10}, uint16(0))
	f.Add([]byte{}, uint16(1))
	f.Fuzz(func(t *testing.T, block []byte, room uint16) {
		dst := make([]byte, int(room)+16)
		for i := range dst[room:] {
			dst[int(room)+i] = 0x5a
		}
		n, err := DecodeS2(dst[:room], block)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || n != 0 {
				t.Fatalf("n %d err %v", n, err)
			}
		} else if n > int(room) {
			t.Fatalf("decoded %d bytes into %d", n, room)
		}
		for _, c := range dst[room:] {
			if c != 0x5a {
				t.Fatal("wrote past the room")
			}
		}
		// The block's bytes as data: encode, then decode back.
		enc := EncodeS2(nil, block)
		out := make([]byte, len(block))
		if m, err := DecodeS2(out, enc); err != nil || m != len(block) || !bytes.Equal(out, block) {
			t.Fatalf("round trip of %d bytes: %d, %v", len(block), m, err)
		}
	})
}

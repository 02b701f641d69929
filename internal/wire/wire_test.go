package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestHeaderGoldenBytes(t *testing.T) {
	h := Header{Type: TypeData, Channel: 0x0102, Len: 0x10, Seq: 0x03040506,
		Desc: Desc{Collective: AllReduce, DType: 2, RedOp: 3, Root: 7, Group: 0x0a0b0c0d, Tag: 9, Call: 0x1112131415161718, Count: 0x0102030405060708}}
	var b [HeaderSize]byte
	h.Put(b[:])
	want := []byte{1, 0, 0x02, 0x01, 0x10, 0, 0, 0, 0x06, 0x05, 0x04, 0x03, 0, 0, 0, 0,
		1, 2, 3, 0, 7, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a, 9, 0, 0, 0,
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("header bytes\n got %v\nwant %v", b, want)
	}
	got, err := ParseHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestParseHeaderRejects(t *testing.T) {
	base := func() []byte {
		var b [HeaderSize]byte
		(&Header{Type: TypeData, Len: 4, Desc: Desc{Collective: Broadcast}}).Put(b[:])
		return b[:]
	}
	cases := map[string]func([]byte) []byte{
		"short":                     func(b []byte) []byte { return b[:HeaderSize-1] },
		"unknown type":              func(b []byte) []byte { b[0] = 99; return b },
		"zero type":                 func(b []byte) []byte { b[0] = 0; return b },
		"flags set":                 func(b []byte) []byte { b[1] = 1; return b },
		"reserved word":             func(b []byte) []byte { b[13] = 1; return b },
		"reserved desc byte":        func(b []byte) []byte { b[19] = 1; return b },
		"data without a collective": func(b []byte) []byte { b[16] = 0; return b },
		"unknown collective":        func(b []byte) []byte { b[16] = 200; return b },
		"data too long":             func(b []byte) []byte { b[4], b[5], b[6], b[7] = 0, 0, 0, 5; return b },
		"control too long": func(b []byte) []byte {
			clear(b)
			b[0], b[5] = byte(TypeAbort), 0x20
			return b
		},
		"control with a desc":  func(b []byte) []byte { b[0], b[4] = byte(TypeAbort), 0; return b },
		"heartbeat with len":   func(b []byte) []byte { clear(b); b[0], b[4] = byte(TypeHeartbeat), 1; return b },
		"heartbeat with a seq": func(b []byte) []byte { clear(b); b[0], b[8] = byte(TypeHeartbeat), 1; return b },
	}
	for name, mutate := range cases {
		if _, err := ParseHeader(mutate(base())); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDescDiffNamesTheFirstDifferingField(t *testing.T) {
	a := Desc{Collective: Broadcast, DType: 1, Root: 0, Call: 5, Count: 8}
	cases := []struct {
		change func(*Desc)
		want   Field
	}{
		{func(*Desc) {}, FieldNone},
		{func(d *Desc) { d.Root = 1 }, FieldRoot},
		{func(d *Desc) { d.Call = 6 }, FieldCall},
		{func(d *Desc) { d.Call, d.Count = 6, 9 }, FieldCall},
		{func(d *Desc) { d.Count = 9 }, FieldCount},
		{func(d *Desc) { d.DType = 2 }, FieldDType},
		{func(d *Desc) { d.RedOp = 2 }, FieldRedOp},
		{func(d *Desc) { d.Collective = AllReduce }, FieldCollective},
		{func(d *Desc) { d.Group = 3 }, FieldGroup},
		{func(d *Desc) { d.Tag = 3 }, FieldStep},
	}
	for _, c := range cases {
		b := a
		c.change(&b)
		if got := a.Diff(&b); got != c.want {
			t.Errorf("%+v vs %+v: Diff = %v, want %v", a, b, got, c.want)
		}
	}
	e := Desc{Collective: Eager, Count: 8}
	if got := e.Diff(&Desc{Collective: Eager, Count: 8, Tag: 3}); got != FieldTag {
		t.Errorf("eager messages with other tags: Diff = %v, want %v", got, FieldTag)
	}
	if got := (&Desc{Collective: AllReduce, Call: 2, Count: 4, Tag: 7}).Format(Names{}); got != "AllReduce #2 (count=4, dtype 0, step=7)" {
		t.Errorf("Format of a labelled call = %q", got)
	}
	if got := a.Format(Names{}); got != "Broadcast #5 (count=8, dtype 1, root=0)" {
		t.Errorf("Format = %q", got)
	}
	v := Desc{Collective: AllToAll, DType: 3, Root: AllToAllCounts, Call: 2, Count: 2}
	if got := v.Format(Names{}); got != "AllToAll #2 (count=2, dtype 3, split sizes)" {
		t.Errorf("Format = %q", got)
	}
	v.Root = 9
	if got := v.Format(Names{}); got != "AllToAll #2 (count=2, dtype 3, variant 9)" {
		t.Errorf("Format = %q", got)
	}
}

func TestQueryAndStateRoundTrip(t *testing.T) {
	d := Desc{Collective: AllGather, DType: 4, Group: 77, Call: 1 << 40, Count: 3}
	got, err := ParseQuery(MarshalQuery(&d))
	if err != nil || got != d {
		t.Fatalf("query: %+v %v", got, err)
	}
	for _, s := range []State{{Active: true, Desc: d, Done: 9, ForGroup: 3, ForCall: 1 << 33}, {Done: 1}} {
		g, err := ParseState(s.Marshal())
		if err != nil || g != s {
			t.Fatalf("state: %+v %v", g, err)
		}
	}
	if _, err := ParseQuery(make([]byte, QuerySize)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("query for collective 0 accepted: %v", err)
	}
	if _, err := ParseState(append((&State{}).Marshal(), 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("long state accepted: %v", err)
	}
}

func TestHandshakeMessagesRoundTrip(t *testing.T) {
	h := Hello{Version: Version, Channel: 2, Rank: 1, Peer: 3, World: 4, Generation: 9, JobTag: [JobTagSize]byte{1, 2, 3}, Frames: MaxFrames}
	for i := range h.Nonce {
		h.Nonce[i] = byte(i)
	}
	got, err := ParseHello(h.Marshal())
	if err != nil || got != h {
		t.Fatalf("hello: %+v %v", got, err)
	}
	c := Challenge{}
	c.Nonce[0], c.MAC[31] = 1, 2
	gc, err := ParseChallenge(c.Marshal())
	if err != nil || gc != c {
		t.Fatalf("challenge: %+v %v", gc, err)
	}
	v := Verdict{Reason: "bad secret"}
	gv, err := ParseVerdict(v.Marshal())
	if err != nil || gv != v {
		t.Fatalf("verdict: %+v %v", gv, err)
	}
	a := &AbortError{Origin: 2, Culprit: NoRank, Reason: strings.Repeat("é", 3000)}
	ga, err := ParseAbort(a.Marshal())
	if err != nil || ga.Origin != 2 || ga.Culprit != NoRank || len(ga.Reason) > MaxControlPayload-9 {
		t.Fatalf("abort: %+v %v", ga, err)
	}
}

func TestHelloRejectsUnknownFrameProtection(t *testing.T) {
	h := Hello{Version: Version, Rank: 0, Peer: 1, World: 2, Frames: MaxFrames + 1}
	if _, err := ParseHello(h.Marshal()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("frame protection %d accepted: %v", h.Frames, err)
	}
	b := (&Hello{Version: Version, Rank: 0, Peer: 1, World: 2}).Marshal()
	b[HelloSize-1] = 1
	if _, err := ParseHello(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("reserved byte accepted: %v", err)
	}
}

func TestHelloRejectsRankOutsideWorld(t *testing.T) {
	h := Hello{Version: Version, Rank: 4, Peer: 0, World: 4}
	if _, err := ParseHello(h.Marshal()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("rank 4 of 4 accepted: %v", err)
	}
}

func TestControlFramesOverAStream(t *testing.T) {
	var buf bytes.Buffer
	v := Verdict{OK: true}
	if err := WriteControl(&buf, TypeVerdict, v.Marshal()); err != nil {
		t.Fatal(err)
	}
	a := &AbortError{Origin: 1, Culprit: 3, Reason: "rank 3 silent for 2s"}
	if err := WriteControl(&buf, TypeAbort, a.Marshal()); err != nil {
		t.Fatal(err)
	}
	p, err := ReadControl(&buf, TypeVerdict)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ParseVerdict(p); !got.OK {
		t.Fatal("verdict not OK")
	}
	_, err = ReadControl(&buf, TypeVerdict)
	var ae *AbortError
	if !errors.As(err, &ae) || ae.Culprit != 3 {
		t.Fatalf("abort not surfaced: %v", err)
	}
	if _, err := ReadControl(&buf, TypeVerdict); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
}

// FuzzParseHeader: any 32 bytes either fail with ErrMalformed or decode to a
// header that re-encodes to the same bytes.
func FuzzParseHeader(f *testing.F) {
	for _, h := range []Header{{Type: TypeData, Len: 1 << 20, Desc: Desc{Collective: AllReduce, Count: 5, Call: 1}}, {Type: TypeHeartbeat}, {Type: TypeAbort, Len: 12}} {
		var b [HeaderSize]byte
		h.Put(b[:])
		f.Add(b[:])
	}
	f.Add(make([]byte, HeaderSize-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		var out [HeaderSize]byte
		h.Put(out[:])
		if !bytes.Equal(out[:], b[:HeaderSize]) {
			t.Fatalf("re-encoding differs: %v vs %v", out, b[:HeaderSize])
		}
	})
}

// FuzzHandshake feeds arbitrary payloads to every handshake and abort
// decoder: they must never panic, and what they accept must round-trip.
func FuzzHandshake(f *testing.F) {
	h := Hello{Version: Version, Rank: 0, Peer: 1, World: 2}
	f.Add(h.Marshal())
	h.Frames = MaxFrames
	f.Add(h.Marshal())
	f.Add((&Challenge{}).Marshal())
	f.Add((&Verdict{OK: false, Reason: "no"}).Marshal())
	f.Add((&AbortError{Origin: 1, Culprit: 0, Reason: "x"}).Marshal())
	f.Add(MarshalQuery(&Desc{Collective: Barrier, Call: 3}))
	f.Add((&State{Active: true, Desc: Desc{Collective: Eager, Tag: 1}, Done: 2}).Marshal())
	f.Add([]byte{})
	f.Add(helloV2(&Hello{Version: 2, Rank: 0, Peer: 1, World: 2}))
	f.Fuzz(func(t *testing.T, p []byte) {
		hl, err := ParseHello(p)
		if err == nil && !bytes.Equal(hl.Marshal(), p) {
			t.Fatal("hello does not round-trip")
		}
		var ve *VersionError
		if errors.As(err, &ve) && (len(p) < 2 || ve.Peer != le.Uint16(p) || ve.Peer == Version || ve.Local != Version) {
			t.Fatalf("version error %+v from a hello starting %x", ve, p[:min(len(p), 2)])
		}
		if c, err := ParseChallenge(p); err == nil && !bytes.Equal(c.Marshal(), p) {
			t.Fatal("challenge does not round-trip")
		}
		if v, err := ParseVerdict(p); err == nil && !bytes.Equal(v.Marshal(), p) {
			t.Fatal("verdict does not round-trip")
		}
		if a, err := ParseAbort(p); err == nil {
			if b, _ := ParseAbort(a.Marshal()); b == nil || *b != *a {
				t.Fatal("abort does not round-trip")
			}
		}
		if q, err := ParseQuery(p); err == nil && !bytes.Equal(MarshalQuery(&q), p) {
			t.Fatal("query does not round-trip")
		}
		if st, err := ParseState(p); err == nil && !bytes.Equal(st.Marshal(), p) {
			t.Fatal("state does not round-trip")
		}
		// A stream of arbitrary bytes never panics ReadControl.
		_, _ = ReadControl(bytes.NewReader(p), TypeHello)
	})
}

// helloV2 encodes h as a rank of protocol version 2 did: the same fields
// without the frame protection and its reserved byte (72 bytes).
func helloV2(h *Hello) []byte {
	return h.Marshal()[:HelloSize-2]
}

// A Hello of another protocol version, shorter or longer than this
// version's, is a VersionError naming both versions, not a malformed frame.
func TestHelloOfAnotherVersion(t *testing.T) {
	v4 := append((&Hello{Version: 4, Rank: 0, Peer: 1, World: 2}).Marshal(), 0, 0, 0, 0)
	for _, p := range [][]byte{helloV2(&Hello{Version: 2, Rank: 0, Peer: 1, World: 2}), v4} {
		_, err := ParseHello(p)
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Peer != le.Uint16(p) || ve.Local != Version {
			t.Fatalf("hello of %d bytes, version %d: %v, want a VersionError", len(p), le.Uint16(p), err)
		}
		for _, want := range []string{fmt.Sprintf("version %d", ve.Peer), fmt.Sprintf("version %d", Version), "upgrade every rank"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
	}
	// This version's Hello cut short stays malformed.
	h := (&Hello{Version: Version, Rank: 0, Peer: 1, World: 2}).Marshal()
	if _, err := ParseHello(h[:len(h)-1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("short hello of this version: %v, want malformed", err)
	}
}

// A control frame sent after the handshake declares exactly the length its
// type has (a Query, a State), or at least its fixed fields (an Abort): a
// length changed on the path is refused with the header, before a
// receiver waits for bytes that will never come.
func TestControlFrameLengthsAreExact(t *testing.T) {
	for _, c := range []struct {
		t      Type
		length uint32
		ok     bool
	}{
		{TypeQuery, QuerySize, true}, {TypeQuery, QuerySize + 1, false}, {TypeQuery, 0, false},
		{TypeState, StateSize, true}, {TypeState, StateSize + 64, false},
		{TypeAbort, abortFixed, true}, {TypeAbort, MaxControlPayload, true}, {TypeAbort, abortFixed - 1, false},
		{TypeHeartbeat, 0, true}, {TypeHeartbeat, 1, false},
		{TypeHello, HelloSize - 2, true}, // another version's Hello still parses
	} {
		var b [HeaderSize]byte
		h := Header{Type: c.t, Len: c.length}
		h.Put(b[:])
		_, err := ParseHeader(b[:])
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("%v header of length %d: %v, want ok=%v", c.t, c.length, err, c.ok)
		}
	}
}

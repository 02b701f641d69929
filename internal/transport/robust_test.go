package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/syncbuf"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// A rank that was frozen while its read deadline passed finds the peer's
// heartbeats waiting in the socket when it resumes: the read that times
// out is retried for a grace and gets them, instead of blaming the peer.
func TestReadAfterAPassedDeadlineFindsBufferedData(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			done <- c
		}
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := <-done
	defer r.Close()
	if _, err := w.Write([]byte("heartbeat")); err != nil {
		t.Fatal(err)
	}
	// The deadline passed while "frozen": a plain read fails at once.
	_ = r.SetReadDeadline(time.Now().Add(-time.Second))
	buf := make([]byte, 9)
	if _, err := r.Read(buf); !isTimeout(err) {
		t.Fatalf("plain read after a passed deadline: %v, want a timeout", err)
	}
	n, err := liveReader{r, time.Second, new(atomic.Bool)}.Read(buf)
	if err != nil || string(buf[:n]) != "heartbeat" {
		t.Fatalf("live read = %q, %v", buf[:n], err)
	}
}

// A dialer that cannot prove the secret learns nothing about the job: the
// listener answers any Hello with a challenge, and a wrong response with a
// verdict that says only that authentication failed, whatever the Hello
// claimed; the listener's own error keeps the detail for its log.
func TestHandshakeRevealsNothingBeforeAuthentication(t *testing.T) {
	for _, hello := range []wire.Hello{
		{Version: wire.Version, Rank: 0, Peer: 0, World: 3},                     // wrong job, world and rank
		{Version: wire.Version, Rank: 0, Peer: 1, World: 2, Generation: 7},      // right shape, wrong generation
		{Version: wire.Version, Rank: 0, Peer: 1, World: 2, JobTag: [16]byte{}}, // right everything but the secret
	} {
		a, b := net.Pipe()
		listener := Identity{JobID: "job", Rank: 1, World: 2, Secret: []byte("s3cret")}
		errc := make(chan error, 1)
		go func() {
			_, _, err := AcceptHandshake(context.Background(), b, listener)
			errc <- err
		}()
		if err := wire.WriteControl(a, wire.TypeHello, hello.Marshal()); err != nil {
			t.Fatal(err)
		}
		if _, err := wire.ReadControl(a, wire.TypeChallenge); err != nil {
			t.Fatalf("hello %+v: no challenge: %v", hello, err)
		}
		if err := wire.WriteControl(a, wire.TypeResponse, make([]byte, wire.MACSize)); err != nil {
			t.Fatal(err)
		}
		p, err := wire.ReadControl(a, wire.TypeVerdict)
		if err != nil {
			t.Fatal(err)
		}
		v, err := wire.ParseVerdict(p)
		if err != nil || v.OK || v.Reason != "authentication failed" {
			t.Errorf("hello %+v: verdict %+v (%v), want a bare refusal", hello, v, err)
		}
		if lerr := <-errc; lerr == nil || !strings.Contains(lerr.Error(), "does not know the job secret") {
			t.Errorf("listener error = %v", lerr)
		}
		a.Close()
		b.Close()
	}
}

// A rank of protocol version 2 that dials this version is refused with a
// verdict naming both versions (and nothing else: no challenge, nothing of
// the job), the listener's error says the same; a rank of this version
// that dials an older listener, which closes without a word, is told that
// the peer may run an older release.
func TestHandshakeNamesBothProtocolVersions(t *testing.T) {
	listener := Identity{JobID: "secret-job-name", Rank: 1, World: 2, Secret: []byte("s3cret")}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	go func() {
		_, _, err := AcceptHandshake(context.Background(), b, listener)
		b.Close() // as the mesh does after a refusal
		errc <- err
	}()
	old := wire.Hello{Version: 2, Rank: 0, Peer: 1, World: 2}
	if err := wire.WriteControl(a, wire.TypeHello, old.Marshal()[:wire.HelloSize-2]); err != nil { // version 2's 72 bytes
		t.Fatal(err)
	}
	p, err := wire.ReadControl(a, wire.TypeVerdict)
	if err != nil {
		t.Fatalf("a version-2 dialer got no verdict: %v", err)
	}
	v, err := wire.ParseVerdict(p)
	if err != nil || v.OK {
		t.Fatalf("verdict %+v (%v), want a refusal", v, err)
	}
	for _, want := range []string{"protocol version 2", fmt.Sprintf("protocol version %d", wire.Version), "upgrade every rank"} {
		if !strings.Contains(v.Reason, want) {
			t.Errorf("verdict %q does not say %q", v.Reason, want)
		}
	}
	if strings.Contains(v.Reason, listener.JobID) || strings.Contains(v.Reason, "rank 1") || strings.Contains(v.Reason, "world") {
		t.Errorf("verdict %q tells an unauthenticated dialer more than the versions", v.Reason)
	}
	lerr := <-errc
	var ve *wire.VersionError
	if !errors.As(lerr, &ve) || ve.Peer != 2 || ve.Local != wire.Version || !errors.Is(lerr, ErrAuth) {
		t.Errorf("listener error = %v, want an authentication refusal with a VersionError 2/%d", lerr, wire.Version)
	}

	// This version dials a listener of version 2, which cannot parse the
	// longer Hello and closes.
	c, d := net.Pipe()
	defer c.Close()
	go func() {
		_, _, _ = wire.ReadAnyControl(d)
		d.Close()
	}()
	dialer := Identity{JobID: "secret-job-name", Rank: 0, World: 2, Secret: []byte("s3cret")}
	_, err = DialHandshake(context.Background(), c, dialer, 1, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("does not speak protocol version %d", wire.Version)) ||
		!strings.Contains(err.Error(), "upgrade every rank") {
		t.Errorf("dialing an older listener: %v, want it to name this protocol version and the upgrade", err)
	}
}

// Strangers that connect and say nothing hold at most maxPendingPerHost
// handshakes of a rank at a time, each for HelloTimeout, and the job's own
// ranks still form their mesh.
func TestIdleStrangersAreBoundedAndTheMeshStillForms(t *testing.T) {
	network, err := NewSockets(SocketsConfig{DisableUnix: true})
	if err != nil {
		t.Fatal(err)
	}
	ln0, ln1 := listenTwo(t, network)
	eps := []Endpoint{ln0.Endpoint(), ln1.Endpoint()}
	logs := &syncbuf.Buffer{}
	mk := func(r int, ln Listener) MeshConfig {
		return MeshConfig{Identity: Identity{JobID: "job", Rank: r, World: 2, Secret: []byte("s")}, Channels: 1,
			Network: network, Listener: ln, Endpoints: eps, Logger: zerolog.New(logs),
			Link: LinkConfig{Silence: 2 * time.Second, Heartbeat: 200 * time.Millisecond, Chunk: 4096}}
	}
	// Rank 1 accepts; strangers fill its handshake slots before rank 0 dials.
	type result struct {
		m   *Mesh
		err error
	}
	res1 := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		m, err := Connect(ctx, mk(1, ln1))
		res1 <- result{m, err}
	}()
	var strangers []net.Conn
	for range 3 * maxPendingPerHost {
		c, err := net.Dial("tcp", ln1.Endpoint().TCP)
		if err != nil {
			t.Fatal(err)
		}
		strangers = append(strangers, c)
	}
	defer func() {
		for _, c := range strangers {
			c.Close()
		}
	}()
	m0, err := Connect(ctx, mk(0, ln0))
	if err != nil {
		t.Fatal(err)
	}
	defer m0.Close()
	r1 := <-res1
	if r1.err != nil {
		t.Fatal(r1.err)
	}
	defer r1.m.Close()
	st := r1.m.gate.Stats()
	if st.Pending > maxPendingPerHost || st.Evicted == 0 {
		t.Fatalf("gate %+v: want at most %d pending from one host, the oldest evicted", st, maxPendingPerHost)
	}
	if !strings.Contains(logs.String(), "refused an unauthenticated connection") {
		t.Fatalf("refusals over the cap not logged: %s", logs.String())
	}
}

func TestJudgeState(t *testing.T) {
	mine := Desc{Collective: wire.Broadcast, Root: 0, Call: 5, Count: 2}
	other := mine
	other.Root = 1
	cases := []struct {
		name  string
		st    wire.State
		field wire.Field
		wrong bool
	}{
		{"behind, idle", wire.State{Done: 3}, wire.FieldNone, false},
		{"behind, in an earlier call", wire.State{Active: true, Desc: Desc{Collective: wire.Barrier, Call: 4}, Done: 3}, wire.FieldNone, false},
		{"same call, same arguments", wire.State{Active: true, Desc: mine, Done: 4}, wire.FieldNone, false},
		{"same call, another root", wire.State{Active: true, Desc: other, Done: 4}, wire.FieldRoot, true},
		{"finished the call", wire.State{Done: 5, Desc: mine}, wire.FieldCall, true},
		{"finished it with another root", wire.State{Done: 5, Desc: other}, wire.FieldRoot, true},
		{"past the call", wire.State{Active: true, Desc: Desc{Collective: wire.Barrier, Call: 6}, Done: 5}, wire.FieldCall, true},
		{"another group's call", wire.State{Active: true, Desc: Desc{Collective: wire.AllReduce, Group: 9, Call: 5}, Done: 2}, wire.FieldNone, false},
	}
	for _, c := range cases {
		c.st.ForGroup, c.st.ForCall = mine.Group, mine.Call
		f, why := JudgeState(&mine, &c.st)
		if (why != "") != c.wrong || f != c.field {
			t.Errorf("%s: JudgeState = %v, %q; want field %v, wrong %v", c.name, f, why, c.field, c.wrong)
		}
	}
	// An answer about an earlier call says nothing about this one.
	old := wire.State{Done: 9, Desc: other, ForGroup: mine.Group, ForCall: mine.Call - 1}
	if f, why := JudgeState(&mine, &old); why != "" || f != wire.FieldNone {
		t.Errorf("a stale answer was judged: %v %q", f, why)
	}
}

// A send's buffer belongs to the link's writer until its Claim hands it
// back: a send still queued is withdrawn (the writer never reads it), and
// a send the writer took is released when its write ends, here because the
// peer vanishes mid-message. After either the sender writes into the
// buffer at once; under -race, a read by the writer left unordered before
// that write fails the test.
func TestAClaimHandsTheBufferBack(t *testing.T) {
	network := NewInmem()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ln0, _ := network.Listen(ctx)
	ln1, _ := network.Listen(ctx)
	eps := []Endpoint{ln0.Endpoint(), ln1.Endpoint()}
	id1 := Identity{JobID: "job", Rank: 1, World: 2, Secret: []byte("s")}
	go func() { // rank 1 authenticates, then reads nothing: rank 0's writes block
		c, err := ln1.Accept()
		if err != nil {
			return
		}
		if _, _, err := AcceptHandshake(context.Background(), c, id1); err != nil {
			return
		}
		<-ctx.Done()
	}()
	m, err := Connect(ctx, MeshConfig{
		Identity: Identity{JobID: "job", Rank: 0, World: 2, Secret: []byte("s")}, Channels: 1, Network: network,
		Listener: ln0, Endpoints: eps, Logger: zerolog.Nop(),
		Link: LinkConfig{Silence: time.Hour, Heartbeat: 10 * time.Minute, Chunk: 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	type send struct {
		buf   []byte
		claim *Claim
		done  chan Result
	}
	sends := make([]send, 2)
	for i := range sends {
		s := send{buf: make([]byte, 1<<16), claim: NewClaim(), done: make(chan Result, 1)}
		req := SendReq{Desc: Desc{Collective: wire.Eager, DType: 1, Count: 1 << 14}, Buf: s.buf, Chunk: 4096, Done: s.done, Claim: s.claim}
		if err := m.Link(1, 0).Send(req, ctx.Done()); err != nil {
			t.Fatal(err)
		}
		sends[i] = s
	}
	// The second send waits behind the first, whose write cannot end
	// while rank 1 reads nothing: it is withdrawn, whatever the timing.
	if !sends[1].claim.Withdraw() {
		t.Fatal("a send queued behind a blocked one could not be withdrawn")
	}
	network.Sever(ln1.Endpoint())
	select {
	case <-m.Failed():
	case <-ctx.Done():
		t.Fatal("rank 0 never noticed rank 1's end")
	}
	// The first send was either never taken (withdrawn now) or is released
	// when its write fails.
	if !sends[0].claim.Withdraw() {
		select {
		case <-sends[0].claim.Released():
		case <-ctx.Done():
			t.Fatal("the writer never released a send whose link broke")
		}
	}
	for _, s := range sends {
		clear(s.buf) // the sender reuses its buffers
		select {
		case <-s.done:
			t.Fatal("a send to a peer that read nothing was reported sent")
		default:
		}
	}
}

// A revoked guard keeps the links off a call's buffer: once it has settled
// (no goroutine inside), the reader copies no more frames into the
// receive's buffer, although the peer keeps sending and nothing else has
// stopped the link. The buffer is compared after both meshes are closed,
// which waits for every link goroutine. (A try in which the whole message
// arrived before the guard was revoked proves nothing and is repeated.)
func TestARevokedGuardKeepsTheLinksOffTheBuffer(t *testing.T) {
	for try := range 3 {
		if revokedGuardKeepsTheLinksOff(t) {
			return
		}
		t.Logf("try %d: the whole message arrived before the guard was revoked", try)
	}
	t.Fatal("every try's message arrived before its guard was revoked")
}

func revokedGuardKeepsTheLinksOff(t *testing.T) (conclusive bool) {
	s, err := NewSockets(SocketsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tm, errs := formMesh(t, s, false, 2, same(""), nil)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const size = 64 << 20
	d := Desc{Collective: wire.AllReduce, DType: 1, Count: size}
	src := make([]byte, size)
	for i := range src {
		src[i] = 1
	}
	var g Guard
	dst := make([]byte, size)
	recvLink := tm.meshes[0].Link(1, 0)
	if err := recvLink.Recv(RecvReq{Desc: d, Buf: dst, Tag: 1, Done: make(chan Result, 1), Guard: &g}, ctx.Done()); err != nil {
		t.Fatal(err)
	}
	if err := tm.meshes[1].Link(0, 0).Send(SendReq{Desc: d, Buf: src, Chunk: 4096, Tag: 1, Done: make(chan Result, 1)}, ctx.Done()); err != nil {
		t.Fatal(err)
	}
	for recvLink.rxFrames.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("no frame arrived")
		}
		runtime.Gosched()
	}
	g.Revoke()
	if !g.settle(time.Minute) {
		t.Fatal("a goroutine stayed inside the guard")
	}
	seen := append([]byte(nil), dst...)
	for _, m := range tm.meshes {
		m.Close()
	}
	if !bytes.Equal(seen, dst) {
		t.Fatal("the reader wrote into the buffer after its guard was revoked")
	}
	return !bytes.Equal(dst, src)
}

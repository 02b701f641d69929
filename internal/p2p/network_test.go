package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// rankMesh is one communicator of n ranks, each with its own p2p.Network
// (its own libp2p host), formed with transport.Connect.
type rankMesh struct {
	nets   []*Network
	meshes []*transport.Mesh
	errs   []error
}

// refusalLogged is what a rank logs when it refuses a connection.
const refusalLogged = "refused an unauthenticated connection"

// formMesh forms the mesh within a minute (a hang detector, not a speed
// limit). A rank refused for its secret ends the forming of all once the
// refusal is logged: the others would wait for it until the deadline.
func formMesh(t *testing.T, n int, secret func(r int) string, logs *syncbuf.Buffer) *rankMesh {
	t.Helper()
	rm := &rankMesh{nets: make([]*Network, n), meshes: make([]*transport.Mesh, n), errs: make([]error, n)}
	lns := make([]transport.Listener, n)
	eps := make([]transport.Endpoint, n)
	for r := range n {
		nw, err := NewNetwork(NetworkConfig{})
		if err != nil {
			t.Fatal(err)
		}
		rm.nets[r] = nw
		ln, err := nw.Listen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Endpoints travel through the rendezvous as JSON: make them do so.
		b, err := json.Marshal(ln.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &eps[r]); err != nil {
			t.Fatal(err)
		}
		lns[r] = ln
	}
	t.Cleanup(func() {
		for _, m := range rm.meshes {
			if m != nil {
				m.Close()
			}
		}
		for _, nw := range rm.nets {
			nw.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := zerolog.Nop()
			if logs != nil {
				log = zerolog.New(logs)
			}
			rm.meshes[r], rm.errs[r] = transport.Connect(ctx, transport.MeshConfig{
				Identity: transport.Identity{JobID: "job", Rank: r, World: n, Secret: []byte(secret(r))},
				Channels: 2, Network: rm.nets[r], Listener: lns[r], Endpoints: eps, Logger: log,
				Link: transport.LinkConfig{Silence: 10 * time.Second, Heartbeat: time.Second, Chunk: 1 << 12},
			})
			if errors.Is(rm.errs[r], transport.ErrAuth) {
				for logs != nil && !strings.Contains(logs.String(), refusalLogged) && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	return rm
}

func int32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func TestEndpointRoundTripsThroughJSON(t *testing.T) {
	nw, err := NewNetwork(NetworkConfig{HostID: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	ln, err := nw.Listen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ep := ln.Endpoint()
	want := "/ip4/127.0.0.1/tcp/"
	if !strings.HasPrefix(ep.TCP, want) || !strings.HasSuffix(ep.TCP, "/p2p/"+nw.Host().ID().String()) || ep.Unix != "" || ep.Host != "node-a" {
		t.Fatalf("endpoint %+v", ep)
	}
	b, _ := json.Marshal(ep)
	var back transport.Endpoint
	if err := json.Unmarshal(b, &back); err != nil || back != ep {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := endpointAddr(back); err != nil {
		t.Fatal(err)
	}
	if _, err := nw.Listen(context.Background()); err == nil {
		t.Fatal("second open listener allowed")
	}
	if _, err := endpointAddr(transport.Endpoint{TCP: "127.0.0.1:80"}); err == nil {
		t.Fatal("host:port accepted as a libp2p endpoint")
	}
	if _, err := endpointAddr(transport.Endpoint{TCP: "/ip4/127.0.0.1/tcp/80"}); err == nil {
		t.Fatal("endpoint without a peer id accepted")
	}
}

func TestMessagesArriveInOrderAndReduce(t *testing.T) {
	rm := formMesh(t, 3, func(int) string { return "secret" }, nil)
	for r, err := range rm.errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	const count = 5000
	desc := transport.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Int32), RedOp: uint8(reduce.Sum), Count: count, Call: 1}
	a, b, acc := make([]int32, count), make([]int32, count), make([]int32, count)
	for i := range a {
		a[i], b[i], acc[i] = int32(i), int32(2*i), 1
	}
	got1, accB := make([]byte, 4*count), int32Bytes(acc)
	done := make(chan transport.Result, 16)
	// Every ordered pair, so streams both dialed and accepted carry data.
	for _, pair := range [][2]int{{0, 1}, {2, 0}, {1, 2}} {
		from, to := pair[0], pair[1]
		clear(got1)
		copy(accB, int32Bytes(acc))
		tx, rx := rm.meshes[from].Link(to, 1), rm.meshes[to].Link(from, 1)
		if err := rx.Recv(transport.RecvReq{Desc: desc, Buf: got1, Tag: 1, Done: done}, nil); err != nil {
			t.Fatal(err)
		}
		if err := rx.Recv(transport.RecvReq{Desc: desc, Buf: accB, Reduce: true, DType: reduce.Int32, Op: reduce.Sum, Tag: 2, Done: done}, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Send(transport.SendReq{Desc: desc, Buf: int32Bytes(a), Chunk: 4096, Tag: 3, Done: done}, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Send(transport.SendReq{Desc: desc, Buf: int32Bytes(b), Chunk: 4096, Tag: 4, Done: done}, nil); err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for len(seen) < 4 {
			select {
			case r := <-done:
				seen[r.Tag] = true
			case <-time.After(time.Minute):
				t.Fatalf("%d→%d: only %v completed; mesh err %v", from, to, seen, rm.meshes[to].Err())
			}
		}
		if !bytes.Equal(got1, int32Bytes(a)) {
			t.Fatalf("%d→%d: copied message differs", from, to)
		}
		for i := range count {
			if v := int32(binary.NativeEndian.Uint32(accB[4*i:])); v != int32(1+2*i) {
				t.Fatalf("%d→%d: reduced elem %d = %d", from, to, i, v)
			}
		}
	}
}

func TestWrongSecretIsRefusedAndLogged(t *testing.T) {
	logs := &syncbuf.Buffer{}
	rm := formMesh(t, 2, func(r int) string { return fmt.Sprint("secret-", r) }, logs)
	if rm.errs[0] == nil || rm.errs[1] == nil {
		t.Fatalf("mesh formed with different secrets: %v", rm.errs)
	}
	if !errors.Is(rm.errs[0], transport.ErrAuth) {
		t.Fatalf("dialer error %v is not ErrAuth", rm.errs[0])
	}
	if !strings.Contains(rm.errs[1].Error(), "refused") {
		t.Fatalf("acceptor error %v does not say the connection was refused", rm.errs[1])
	}
	if !strings.Contains(logs.String(), refusalLogged) {
		t.Fatalf("refusal not logged: %s", logs.String())
	}
	// The log names the dialer by address and by its Noise-authenticated peer ID.
	if want := `"remote":"/ip4/127.0.0.1/tcp/`; !strings.Contains(logs.String(), want) ||
		!strings.Contains(logs.String(), "/p2p/"+rm.nets[0].Host().ID().String()) {
		t.Fatalf("refusal log lacks the remote address and peer id: %s", logs.String())
	}
}

func TestClosedHostIsNamed(t *testing.T) {
	rm := formMesh(t, 3, func(int) string { return "secret" }, nil)
	for r, err := range rm.errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := rm.nets[2].Close(); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		select {
		case <-rm.meshes[r].Failed():
			var e *transport.Error
			if err := error(rm.meshes[r].Err()); !errors.As(err, &e) || e.Rank != 2 || e.Kind != transport.KindPeerDied {
				t.Fatalf("rank %d blames %v, want rank 2", r, err)
			}
		case <-time.After(time.Minute): // KindPeerDied above: not the 10 s silence timeout
			t.Fatalf("rank %d did not notice rank 2's host closing", r)
		}
	}
}

func TestDialHonoursItsContext(t *testing.T) {
	// A listener that never opens the data protocol: the stream negotiation
	// fails at once; a peer that is not there at all fails when ctx ends.
	a, err := NewNetwork(NetworkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewNetwork(NetworkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ep := transport.Endpoint{TCP: b.Host().Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Dial(ctx, ep); err == nil || !strings.Contains(err.Error(), "negotiate") || ctx.Err() != nil {
		t.Fatalf("dial to a rank not listening: %v (context: %v), want a failed negotiation before the deadline", err, ctx.Err())
	}
	b.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := a.Dial(ctx, ep); err == nil {
		t.Fatal("dial to a closed host succeeded")
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("dial took %v: it ignored its context's 300 ms deadline", d)
	}
}

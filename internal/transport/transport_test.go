package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// networks is the conformance matrix: every test runs over each.
func networks(t *testing.T) map[string]func() (Network, bool) {
	return map[string]func() (Network, bool){
		"inmem": func() (Network, bool) { return NewInmem(), false },
		"tcp": func() (Network, bool) {
			s, err := NewSockets(SocketsConfig{DisableUnix: true})
			if err != nil {
				t.Fatal(err)
			}
			return s, false
		},
		"unix": func() (Network, bool) {
			s, err := NewSockets(SocketsConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return s, false
		},
		"shm": func() (Network, bool) {
			s, err := NewSockets(SocketsConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return s, true
		},
	}
}

type testMesh struct {
	meshes []*Mesh
	lns    []Listener
	net    Network
}

func formMesh(t *testing.T, network Network, shm bool, n int, secret func(r int) string, logs *syncbuf.Buffer) (*testMesh, []error) {
	t.Helper()
	tm := &testMesh{meshes: make([]*Mesh, n), lns: make([]Listener, n), net: network}
	eps := make([]Endpoint, n)
	for r := range eps {
		ln, err := network.Listen(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tm.lns[r], eps[r] = ln, ln.Endpoint()
	}
	// A minute to form (a hang detector, not a speed limit). A rank
	// refused for its secret ends the forming of all once the refusal is
	// logged: the others would wait for it until the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := zerolog.Nop()
			if logs != nil {
				log = zerolog.New(logs)
			}
			tm.meshes[r], errs[r] = Connect(ctx, MeshConfig{
				Identity: Identity{JobID: "job", Rank: r, World: n, Secret: []byte(secret(r))},
				Channels: 2, Network: network, Listener: tm.lns[r], Endpoints: eps, Logger: log, SharedMemory: shm,
				Link: LinkConfig{Silence: 10 * time.Second, Heartbeat: time.Second, Chunk: 1 << 12},
			})
			if errors.Is(errs[r], ErrAuth) {
				for logs != nil && !strings.Contains(logs.String(), refusalLogged) && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range tm.meshes {
			if m != nil {
				m.Close()
			}
		}
	})
	return tm, errs
}

func same(string) func(int) string { return func(int) string { return "secret" } }

// refusalLogged is what a rank logs when it refuses a connection.
const refusalLogged = "refused an unauthenticated connection"

func TestConformanceMessagesArriveInOrderAndReduce(t *testing.T) {
	for name, mk := range networks(t) {
		t.Run(name, func(t *testing.T) {
			network, shm := mk()
			tm, errs := formMesh(t, network, shm, 3, same(""), nil)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			if shm != tm.meshes[0].Link(1, 0).Shared() {
				t.Fatalf("shared memory = %v, want %v", !shm, shm)
			}
			desc := Desc{Collective: wire.AllReduce, DType: uint8(reduce.Int32), RedOp: uint8(reduce.Sum), Count: 5000, Call: 1}
			done := make(chan Result, 16)
			// rank 0 sends two messages to rank 1 on channel 1; rank 1 copies the first, reduces the second.
			a := make([]int32, 5000)
			b := make([]int32, 5000)
			for i := range a {
				a[i], b[i] = int32(i), int32(2*i)
			}
			got1 := make([]byte, 20000)
			acc := make([]int32, 5000)
			for i := range acc {
				acc[i] = 1
			}
			accB := bytesOfInt32(acc)
			l01, l10 := tm.meshes[0].Link(1, 1), tm.meshes[1].Link(0, 1)
			if err := l10.Recv(RecvReq{Desc: desc, Buf: got1, Tag: 1, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			if err := l10.Recv(RecvReq{Desc: desc, Buf: accB, Reduce: true, DType: reduce.Int32, Op: reduce.Sum, Tag: 2, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			if err := l01.Send(SendReq{Desc: desc, Buf: bytesOfInt32(a), Chunk: 4096, Tag: 3, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			if err := l01.Send(SendReq{Desc: desc, Buf: bytesOfInt32(b), Chunk: 4096, Tag: 4, Done: done}, nil); err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for len(seen) < 4 {
				select {
				case r := <-done:
					seen[r.Tag] = true
				case <-time.After(time.Minute):
					t.Fatalf("only %v completed; mesh err %v", seen, tm.meshes[1].Err())
				}
			}
			if !bytes.Equal(got1, bytesOfInt32(a)) {
				t.Fatal("copied message differs")
			}
			for i, v := range acc {
				if v != int32(1+2*i) {
					t.Fatalf("reduced elem %d = %d", i, v)
				}
			}
		})
	}
}

func TestConformanceWrongSecretIsRefusedAndLogged(t *testing.T) {
	for name, mk := range networks(t) {
		t.Run(name, func(t *testing.T) {
			network, shm := mk()
			logs := &syncbuf.Buffer{}
			_, errs := formMesh(t, network, shm, 2, func(r int) string { return fmt.Sprint("secret-", r) }, logs)
			if errs[0] == nil || errs[1] == nil {
				t.Fatalf("mesh formed with different secrets: %v", errs)
			}
			if !errors.Is(errs[0], ErrAuth) {
				t.Fatalf("dialer error %v is not ErrAuth", errs[0])
			}
			if !strings.Contains(errs[1].Error(), "refused") {
				t.Fatalf("acceptor error %v does not say the connection was refused", errs[1])
			}
			if !strings.Contains(logs.String(), refusalLogged) || !strings.Contains(logs.String(), `"remote"`) {
				t.Fatalf("refusal log lacks the remote address: %s", logs.String())
			}
		})
	}
}

func TestConformanceDeadPeerIsNamed(t *testing.T) {
	network := NewInmem()
	tm, errs := formMesh(t, network, false, 3, same(""), nil)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	network.Sever(tm.lns[2].Endpoint())
	// KindPeerDied: the severed connections, not the 10 s silence timeout.
	for r := 0; r < 2; r++ {
		select {
		case <-tm.meshes[r].Failed():
			e := tm.meshes[r].Failure()
			if e.Rank != 2 || e.Kind != KindPeerDied {
				t.Fatalf("rank %d: %v", r, e)
			}
		case <-time.After(time.Minute):
			t.Fatalf("rank %d did not notice rank 2's death", r)
		}
	}
}

// A peer that completes the handshake and then says nothing at all is
// declared silent after the silence timeout, naming it.
func TestConformanceSilentPeerIsDeclaredDead(t *testing.T) {
	network := NewInmem()
	ln0, _ := network.Listen(context.Background())
	ln1, _ := network.Listen(context.Background())
	eps := []Endpoint{ln0.Endpoint(), ln1.Endpoint()}
	id1 := Identity{JobID: "job", Rank: 1, World: 2, Secret: []byte("s")}
	go func() { // rank 1 is a rogue implementation that authenticates, then goes quiet
		c, err := ln1.Accept()
		if err != nil {
			return
		}
		if _, _, err := AcceptHandshake(context.Background(), c, id1); err != nil {
			return
		}
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Connect(ctx, MeshConfig{
		Identity: Identity{JobID: "job", Rank: 0, World: 2, Secret: []byte("s")}, Channels: 1, Network: network,
		Listener: ln0, Endpoints: eps, Logger: zerolog.Nop(),
		Link: LinkConfig{Silence: 300 * time.Millisecond, Heartbeat: 75 * time.Millisecond, Chunk: 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// KindSilent names the detector; a minute is the hang detector.
	select {
	case <-m.Failed():
		if e := m.Failure(); e.Kind != KindSilent || e.Rank != 1 {
			t.Fatalf("got %v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("silent peer never declared dead")
	}
}

func TestMalformedFrameIsAProtocolError(t *testing.T) {
	network := NewInmem()
	ln0, _ := network.Listen(context.Background())
	ln1, _ := network.Listen(context.Background())
	eps := []Endpoint{ln0.Endpoint(), ln1.Endpoint()}
	go func() {
		c, err := ln1.Accept()
		if err != nil {
			return
		}
		if _, _, err := AcceptHandshake(context.Background(), c, Identity{JobID: "job", Rank: 1, World: 2, Secret: []byte("s")}); err != nil {
			return
		}
		garbage := make([]byte, wire.HeaderSize)
		garbage[0] = 0xee
		_, _ = c.Write(garbage)
		buf := make([]byte, 1024) // then stay connected until rank 0 hangs up
		for {
			if _, err := c.Read(buf); err != nil {
				c.Close()
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Connect(ctx, MeshConfig{
		Identity: Identity{JobID: "job", Rank: 0, World: 2, Secret: []byte("s")}, Channels: 1, Network: network,
		Listener: ln0, Endpoints: eps, Logger: zerolog.Nop(),
		Link: LinkConfig{Silence: time.Minute, Heartbeat: time.Second, Chunk: 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	select {
	case <-m.Failed():
		if e := m.Failure(); e.Kind != KindProtocol || e.Rank != 1 || !errors.Is(e, wire.ErrMalformed) {
			t.Fatalf("got %v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("garbage not detected")
	}
}

func bytesOfInt32(v []int32) []byte { return unsafeBytes(v) }

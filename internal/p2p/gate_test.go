package p2p

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/p2p/p2ptest"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// gatedCoordinator serves the rendezvous on a coordinator listener built
// from cfg (job id, secret and a loopback port filled in).
func gatedCoordinator(t *testing.T, cfg CoordinatorConfig, world int) (*Listener, int) {
	t.Helper()
	cfg.JobID, cfg.Secret = jobID, []byte(jobSecret)
	ln, err := ListenCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{JobID: jobID, Secret: []byte(jobSecret), World: world, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	a := ln.Addr().(Addr)
	var port int
	if _, err := fmt.Sscanf(a.Multiaddr.String(), "/ip4/127.0.0.1/tcp/%d", &port); err != nil {
		t.Fatal(err)
	}
	return ln, port
}

func gateStats(t *testing.T, ln *Listener) (s struct{ Pending, Evicted, Expired int }) {
	t.Helper()
	g, ok := ln.GateStats()
	if !ok {
		t.Fatal("the coordinator's host is not gated")
	}
	s.Pending, s.Evicted, s.Expired = g.Pending, int(g.Evicted), int(g.Expired)
	return s
}

// Idle TCP connections to the coordinator (which never start Noise) are
// held at most MaxPending at a time, and real ranks register meanwhile.
func TestCoordinatorGateBoundsIdleConnections(t *testing.T) {
	logs := &syncbuf.Buffer{}
	ln, port := gatedCoordinator(t, CoordinatorConfig{MaxPending: 8, MaxPendingPerSource: 8, Logger: zerolog.New(logs)}, 2)
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = join(ctx, dialOnlyHost(t), port, 2, r, jobSecret, jobSecret)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("ranks during the flood: %v", errs)
	}
	s := gateStats(t, ln)
	if s.Pending > 8 || s.Evicted < 200-8 {
		t.Fatalf("gate %+v: want at most 8 pending, the rest of the 200 evicted", s)
	}
	if !strings.Contains(logs.String(), "refused an unauthenticated connection") {
		t.Fatalf("refusals not logged: %s", logs.String())
	}
}

// A connection that completes Noise with a key of its own but never
// proves the job secret is closed at the handshake deadline; a rank's
// connection leaves the gate once its rendezvous authenticates.
func TestCoordinatorGateDeadlineAndAuthentication(t *testing.T) {
	ln, port := gatedCoordinator(t, CoordinatorConfig{HandshakeTimeout: time.Second}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := CoordinatorAddr("127.0.0.1", port, []byte(jobSecret), jobID)
	if err != nil {
		t.Fatal(err)
	}
	// The stranger opens a rendezvous stream and says nothing.
	stranger := dialOnlyHost(t)
	// (On a loaded machine the deadline may pass before the dial is done.)
	if c, err := stranger.DialRendezvous(ctx, addr.String()); err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, _ = io.Copy(io.Discard, c) // the hello, then the close
	}
	for gateStats(t, ln).Pending > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if s := gateStats(t, ln); s.Expired < 1 {
		t.Fatalf("gate %+v: the stranger's connection did not expire", s)
	}
	// A rank with the secret registers (world 1) and its connection leaves
	// the gate: nothing stays pending although the connection is open.
	h := dialOnlyHost(t)
	ep, _ := json.Marshal("x")
	if _, err := Register(ctx, h, rendezvous.Request{Addr: addr.String(), JobID: jobID, Secret: []byte(jobSecret), World: 1,
		Group: "g0", Member: rendezvous.Member{Rank: 0, Endpoint: ep}}); err != nil {
		t.Fatal(err)
	}
	if s := gateStats(t, ln); s.Pending != 0 {
		t.Fatalf("gate %+v: the rank's connection is still pending after it authenticated", s)
	}
}

// A stranger that sends garbage instead of libp2p's handshake is refused
// by libp2p itself; the refusal is logged (rate-limited) before the
// connection ends, as the tcp control plane logs a bad handshake.
func TestCoordinatorLogsAConnectionLibp2pRefuses(t *testing.T) {
	logs := &syncbuf.Buffer{}
	ln, port := gatedCoordinator(t, CoordinatorConfig{HandshakeTimeout: time.Minute, Logger: zerolog.New(logs)}, 1)
	p2ptest.SendGarbage(t, fmt.Sprintf("127.0.0.1:%d", port))
	if !strings.Contains(logs.String(), closedBeforeAuth) {
		t.Fatalf("the refusal is not logged: %q", logs.String())
	}
	if s := gateStats(t, ln); s.Pending != 0 {
		t.Fatalf("gate %+v: the refused connection is still pending", s)
	}
}

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/rendezvous"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

const (
	jobID     = "job-p2p"
	jobSecret = "a-long-random-job-secret"
)

// coordinator serves the unchanged rendezvous.Server over libp2p with the
// identity derived from secret; it returns the coordinator's port.
func coordinator(t *testing.T, secret string, port, world int, logs *syncbuf.Buffer) int {
	t.Helper()
	ln, err := ListenCoordinator(CoordinatorConfig{JobID: jobID, Secret: []byte(secret), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.Nop()
	if logs != nil {
		log = zerolog.New(logs)
	}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{JobID: jobID, Secret: []byte(secret), World: world, Logger: log})
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
	p, err := ln.Addr().(Addr).Multiaddr.ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dialOnlyHost(t *testing.T) *Host {
	t.Helper()
	h, err := NewHost(HostConfig{DialOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// join registers rank with the coordinator at 127.0.0.1:port, computing the
// coordinator's address from coordSecret and proving secret.
func join(ctx context.Context, h *Host, port, world, rank int, coordSecret, secret string) ([]rendezvous.Member, error) {
	addr, err := CoordinatorAddr("127.0.0.1", port, []byte(coordSecret), jobID)
	if err != nil {
		return nil, err
	}
	ep, _ := json.Marshal(fmt.Sprintf("endpoint-%d", rank))
	return Register(ctx, h, rendezvous.Request{Addr: addr.String(), JobID: jobID, Secret: []byte(secret), World: world,
		Group: "g0", Member: rendezvous.Member{Rank: rank, Endpoint: ep}})
}

func TestRendezvousOverLibp2p(t *testing.T) {
	logs := &syncbuf.Buffer{}
	port := coordinator(t, jobSecret, 0, 3, logs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A rank that reaches the right coordinator but cannot prove the secret
	// is refused by the rendezvous's own HMAC, and logged with its peer ID.
	h := dialOnlyHost(t)
	addr, _ := CoordinatorAddr("127.0.0.1", port, []byte(jobSecret), jobID)
	ep, _ := json.Marshal("x")
	_, err := Register(ctx, h, rendezvous.Request{Addr: addr.String(), JobID: jobID, Secret: []byte("guess"), World: 3,
		Group: "g0", Member: rendezvous.Member{Rank: 1, Endpoint: ep}})
	if !errors.Is(err, rendezvous.ErrRefused) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("wrong secret: %v", err)
	}
	if !strings.Contains(logs.String(), "/p2p/"+h.ID().String()) {
		t.Fatalf("refusal not logged with the rank's peer id: %s", logs.String())
	}

	// The right secret: every rank gets the whole table. Rank 0 uses the
	// host of its data-plane Network, as a p2p rank would.
	nw, err := NewNetwork(NetworkConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	hosts := []*Host{nw.Host(), dialOnlyHost(t), dialOnlyHost(t)}
	tables := make([][]rendezvous.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tables[r], errs[r] = join(ctx, hosts[r], port, 3, r, jobSecret, jobSecret)
		}()
	}
	wg.Wait()
	for r := range 3 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for i, m := range tables[r] {
			var ep string
			_ = json.Unmarshal(m.Endpoint, &ep)
			if m.Rank != i || ep != fmt.Sprintf("endpoint-%d", i) {
				t.Fatalf("rank %d's table row %d: %+v", r, i, m)
			}
		}
	}
}

// A coordinator started with another secret has another derived identity:
// Noise refuses it before any rendezvous byte is sent, and Register stops
// at once instead of retrying until its deadline.
func TestImpostorCoordinatorIsRefusedByNoise(t *testing.T) {
	port := coordinator(t, "not-the-job-secret", 0, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := join(ctx, dialOnlyHost(t), port, 2, 0, jobSecret, jobSecret)
	if !errors.Is(err, rendezvous.ErrRefused) || !strings.Contains(err.Error(), "coordinator key") || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("impostor: %v (context: %v), want a refusal before the deadline, not retries until it", err, ctx.Err())
	}
	// The dial hook on its own says the same.
	addr, _ := CoordinatorAddr("127.0.0.1", port, []byte(jobSecret), jobID)
	if _, err := dialOnlyHost(t).DialRendezvous(ctx, addr.String()); !errors.Is(err, rendezvous.ErrRefused) {
		t.Fatalf("DialRendezvous to an impostor: %v", err)
	}
}

// Ranks may start before the coordinator listens: Register retries.
func TestRegisterWaitsForTheCoordinator(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Register as p2p.Register does, with a dial hook that says when an
	// attempt has failed: the coordinator starts only after one has.
	h := dialOnlyHost(t)
	addr, err := CoordinatorAddr("127.0.0.1", port, []byte(jobSecret), jobID)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan struct{})
	var once sync.Once
	errs := make(chan error, 1)
	go func() {
		ep, _ := json.Marshal("endpoint-0")
		_, err := rendezvous.Register(ctx, rendezvous.Request{Addr: addr.String(), JobID: jobID, Secret: []byte(jobSecret), World: 1,
			Group: "g0", Member: rendezvous.Member{Rank: 0, Endpoint: ep},
			Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				c, err := h.DialRendezvous(ctx, addr)
				if err != nil {
					once.Do(func() { close(failed) })
				}
				return c, err
			}})
		errs <- err
	}()
	select {
	case <-failed:
	case err := <-errs:
		t.Fatalf("Register returned before the coordinator started: %v", err)
	}
	coordinator(t, jobSecret, port, 1, nil)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

func TestRegisterHonoursItsDeadline(t *testing.T) {
	port := coordinator(t, jobSecret, 0, 2, nil) // rank 1 never comes
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := join(ctx, dialOnlyHost(t), port, 2, 0, jobSecret, jobSecret)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Minute {
		t.Fatalf("waited %v: %v; want its 300 ms deadline to end it", time.Since(start), err)
	}
}

func TestCoordinatorAddr(t *testing.T) {
	id, _ := CoordinatorID([]byte(jobSecret), jobID)
	for in, want := range map[string]string{
		"10.1.2.3":  "/ip4/10.1.2.3/tcp/29500/p2p/" + id.String(),
		"fd00::7":   "/ip6/fd00::7/tcp/29500/p2p/" + id.String(),
		"master-0":  "/dns/master-0/tcp/29500/p2p/" + id.String(),
		"localhost": "/dns/localhost/tcp/29500/p2p/" + id.String(),
	} {
		a, err := CoordinatorAddr(in, 29500, []byte(jobSecret), jobID)
		if err != nil || a.String() != want {
			t.Fatalf("%s: %v, %v; want %s", in, a, err, want)
		}
	}
	if _, err := CoordinatorAddr("10.1.2.3", 0, []byte(jobSecret), jobID); err == nil {
		t.Fatal("port 0 accepted")
	}
}

// A coordinator that hangs up during the security handshake (shedding a
// flood) is retried; one that answers with another protocol is not.
func TestSpeaksOtherProtocol(t *testing.T) {
	for msg, want := range map[string]bool{
		"failed to dial X: all dials failed\n  * [/ip4/127.0.0.1/tcp/1] failed to negotiate security protocol: message did not have trailing newline": true,
		"failed to dial X: all dials failed\n  * [/ip4/127.0.0.1/tcp/1] failed to negotiate security protocol: error reading handshake message: EOF":  false,
		"failed to negotiate security protocol: read tcp 127.0.0.1:1: connection reset by peer":                                                       false,
		"dial tcp 127.0.0.1:1: connect: connection refused":                                                                                           false,
	} {
		if got := speaksOtherProtocol(errors.New(msg)); got != want {
			t.Errorf("speaksOtherProtocol(%q) = %v", msg, got)
		}
	}
}

package service

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/internal/admit"
)

// GateStats returns the counters of the gate that bounds unauthenticated
// connections (what these tests check).
func (s *Server) GateStats() admit.Stats { return s.gate.Stats() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func holdIdle(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
}

// Idle strangers do not count against MaxConns: with room for two
// workers, 100 idle connections (of which the gate holds at most 4) leave
// both workers able to work, and the refusals are logged.
func TestService_IdleStrangersDoNotLockWorkersOut(t *testing.T) {
	logs := &lockedBuffer{}
	ts, srv := startServerGate(t, t.TempDir(), shard.Config{Samples: 40, ShardSize: 5, Epochs: 1},
		ServerConfig{MaxConns: 2, MaxPending: 4, MaxPendingPerSource: 4, Logger: zerolog.New(logs)})
	holdIdle(t, ts.addr, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range []string{"w0", "w1"} {
		c := newClient(t, fixed(ts.addr), secret)
		if _, err := c.Pull(ctx, w); err != nil {
			t.Fatalf("%s during the flood: %v", w, err)
		}
	}
	s := srv.GateStats()
	if s.Pending > 4 || s.Evicted < 100-4 {
		t.Fatalf("gate %+v: want at most 4 pending and the rest of the 100 evicted", s)
	}
	if !strings.Contains(logs.String(), "refused an unauthenticated connection") {
		t.Fatalf("refusals not logged: %s", logs.String())
	}
}

// A third authenticated client beyond MaxConns 2 is told the service is
// unavailable; the two connected ones keep working.
func TestService_MaxConnsCountsAuthenticatedConnections(t *testing.T) {
	ts := startServer(t, t.TempDir(), shard.Config{Samples: 40, ShardSize: 5, Epochs: 1}, ServerConfig{MaxConns: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held []*Client
	for _, w := range []string{"w0", "w1"} {
		c := newClient(t, fixed(ts.addr), secret)
		if _, err := c.Pull(ctx, w); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	_, err := newClient(t, fixed(ts.addr), secret).Stats(ctx)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connection limit") {
		t.Fatalf("third client: %v, want ErrUnavailable naming the connection limit", err)
	}
	if _, err := held[0].Stats(ctx); err != nil {
		t.Fatalf("a connected worker after the refusal: %v", err)
	}
}

// Before authenticating, a client can make the server reserve at most a
// handshake frame: a larger length prefix is refused at once.
func TestService_OversizedHandshakeFrameIsRefused(t *testing.T) {
	ts, srv := startServerGate(t, t.TempDir(), shard.Config{Samples: 10, ShardSize: 5, Epochs: 1}, ServerConfig{})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], maxHandshakeFrame+1)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server did not close the connection")
		}
	}
	if s := srv.GateStats(); s.Refused != 1 || s.Pending != 0 {
		t.Fatalf("gate %+v, want one refusal", s)
	}
}

// A silent connection is closed at the handshake deadline.
func TestService_SilentConnectionClosedAtHandshakeDeadline(t *testing.T) {
	ts, srv := startServerGate(t, t.TempDir(), shard.Config{Samples: 10, ShardSize: 5, Epochs: 1}, ServerConfig{HandshakeTimeout: 20 * time.Millisecond})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server did not close the connection")
		}
	}
	if s := srv.GateStats(); s.Pending != 0 || s.Expired+s.Refused == 0 {
		t.Fatalf("gate %+v", s)
	}
}

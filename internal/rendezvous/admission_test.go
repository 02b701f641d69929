package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serveWith(t *testing.T, cfg ServerConfig) (*Server, string) {
	t.Helper()
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed reads from c until the server closes it (EOF or reset).
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server never closed the connection")
		}
	}
}

// Before a client proves the secret the server says nothing about the job
// (its hello is a nonce; its refusal names no job, world or rank) and logs
// the refusal.
func TestNothingRevealedBeforeAuth(t *testing.T) {
	var logs syncBuffer
	_, addr := serveWith(t, ServerConfig{JobID: "job-xyzzy", Secret: []byte("s3cret"), World: 7, Logger: zerolog.New(&logs)})
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	hello, err := readRaw(c, MaxHandshakeMessage)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(hello, &fields); err != nil || len(fields) != 1 || fields["nonce"] == nil {
		t.Fatalf("hello %s: want only a nonce", hello)
	}
	a := auth{Version: ProtocolVersion, Job: "job-xyzzy", Group: "g", World: 7, Rank: 0, Nonce: make([]byte, 32), MAC: []byte("forged")}
	if err := writeMsg(c, a); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(c)
	for _, secret := range []string{"xyzzy", "7", "rank"} {
		if bytes.Contains(rest, []byte(secret)) {
			t.Fatalf("refusal %q reveals %q", rest, secret)
		}
	}
	if !bytes.Contains(rest, []byte("authentication failed")) {
		t.Fatalf("refusal %q", rest)
	}
	if out := logs.String(); !strings.Contains(out, "refused an unauthenticated connection") || !strings.Contains(out, "wrong job secret") {
		t.Fatalf("refusal not logged: %s", out)
	}
}

// A stranger announcing a large message before authenticating is cut off
// at the length prefix: the server never reserves more than
// MaxHandshakeMessage for it.
func TestOversizedHandshakeIsRefusedAtTheLengthPrefix(t *testing.T) {
	srv, addr := serveWith(t, ServerConfig{JobID: "job", Secret: []byte("s3cret"), World: 2, Logger: zerolog.Nop()})
	c := dial(t, addr)
	if _, err := readRaw(c, MaxHandshakeMessage); err != nil {
		t.Fatal(err)
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], MaxHandshakeMessage+1)
	if _, err := c.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, c)
	if s := srv.gate.Stats(); s.Refused != 1 || s.Pending != 0 {
		t.Fatalf("gate %+v, want one refusal and nothing pending", s)
	}
}

// A client that does not authenticate within the handshake timeout is
// closed.
func TestSilentClientIsClosedAtTheHandshakeDeadline(t *testing.T) {
	srv, addr := serveWith(t, ServerConfig{JobID: "job", Secret: []byte("s3cret"), World: 2, HandshakeTimeout: 20 * time.Millisecond, Logger: zerolog.Nop()})
	c := dial(t, addr)
	waitClosed(t, c)
	if s := srv.gate.Stats(); s.Pending != 0 {
		t.Fatalf("gate %+v", s)
	}
}

// A flood of idle connections holds at most MaxPending of them (the
// oldest are closed), and real ranks registering during the flood get
// their table.
func TestFloodOfIdleClientsIsBoundedAndRanksStillRegister(t *testing.T) {
	const max = 8
	srv, addr := serveWith(t, ServerConfig{JobID: "job", Secret: []byte("s3cret"), World: 2, MaxPending: max, MaxPendingPerSource: max, Logger: zerolog.Nop()})
	// 300 idle connections, all opened before the ranks start, and held.
	var flood []net.Conn
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ep, _ := json.Marshal("endpoint")
			_, errs[r] = Register(ctx, Request{Addr: addr, JobID: "job", Secret: []byte("s3cret"), World: 2, Group: "g", Member: Member{Rank: r, Endpoint: ep}})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("ranks during the flood: %v", errs)
	}
	s := srv.gate.Stats()
	if s.Pending > max || s.Evicted < 300-max {
		t.Fatalf("gate %+v: want at most %d pending and the rest of the 300 evicted", s, max)
	}
	t.Logf("gate after the flood: %+v", s)
}

package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBed records the requests it is asked to act on.
type fakeBed struct {
	mu     sync.Mutex
	calls  []string
	failOn string
}

func (f *fakeBed) SetLinks(_ context.Context, spec string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "links "+spec)
	if spec == f.failOn {
		return errors.New("only link clauses apply to the bed")
	}
	return nil
}

func (f *fakeBed) Stall(rank int, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("stall %d %v", rank, d))
	return nil
}

// serve starts Serve on a socket in a temporary directory and returns a
// client of it; the server stops when the test ends.
func serve(t *testing.T, bed Bed) Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, bed) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return Client{Path: path}
}

func TestClientRequestsReachTheBedInOrder(t *testing.T) {
	bed := &fakeBed{failOn: "slow=2:3x"}
	c := serve(t, bed)
	ctx := context.Background()
	if err := c.SetLinks(ctx, "link=3:rate=50mbit"); err != nil {
		t.Fatal(err)
	}
	if err := c.Stall(ctx, 2, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLinks(ctx, ""); err != nil {
		t.Fatal(err)
	}
	err := c.SetLinks(ctx, "slow=2:3x")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "only link clauses") {
		t.Errorf("refused spec: %v, want ErrRefused with the bed's reason", err)
	}
	want := []string{"links link=3:rate=50mbit", "stall 2 300ms", "links ", "links slow=2:3x"}
	bed.mu.Lock()
	defer bed.mu.Unlock()
	if strings.Join(bed.calls, "|") != strings.Join(want, "|") {
		t.Errorf("bed saw %q, want %q", bed.calls, want)
	}
}

func TestBadRequestsAreRefusedWithoutReachingTheBed(t *testing.T) {
	bed := &fakeBed{}
	c := serve(t, bed)
	ctx := context.Background()
	for _, tc := range []struct {
		req  request
		want string
	}{
		{request{Op: "reboot"}, "unknown op"},
		{request{Op: opStall, Rank: 1}, "duration > 0"},
		{request{Op: opStall, Rank: -1, Stall: time.Second}, "rank ≥ 0"},
	} {
		err := c.call(ctx, tc.req)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrRefused mentioning %q", tc.req, err, tc.want)
		}
	}
	// Not JSON at all: the server answers and stays up.
	conn, err := net.Dial("unix", c.Path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("stall everything\n"))
	buf := make([]byte, 256)
	n, _ := conn.Read(buf)
	conn.Close()
	if !strings.Contains(string(buf[:n]), "malformed request") {
		t.Errorf("garbage got %q", buf[:n])
	}
	if err := c.Stall(ctx, 0, time.Millisecond); err != nil {
		t.Errorf("server down after garbage: %v", err)
	}
	bed.mu.Lock()
	defer bed.mu.Unlock()
	if len(bed.calls) != 1 {
		t.Errorf("bed saw %q, want only the last stall", bed.calls)
	}
}

func TestClientWithoutABedFailsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := (Client{}).Stall(ctx, 0, time.Second); err == nil || !strings.Contains(err.Error(), EnvSocket) {
		t.Errorf("no path: %v, want an error naming %s", err, EnvSocket)
	}
	err := Client{Path: filepath.Join(t.TempDir(), "absent.sock")}.SetLinks(ctx, "")
	if err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("absent socket: %v, want a dial error", err)
	}
}

// A server that never answers: the call ends with its context.
func TestClientCallEndsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Client{Path: path}.SetLinks(ctx, "") }()
	c := <-accepted
	defer c.Close()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
}

package rendezvous

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func serve(t *testing.T, world int) string {
	t.Helper()
	srv, err := NewServer(ServerConfig{JobID: "job", Secret: []byte("s3cret"), World: world, Logger: zerolog.Nop()})
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
	return ln.Addr().String()
}

func join(addr string, world, rank int, secret string, settings map[string]string) ([]Member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang detector
	defer cancel()
	ep, _ := json.Marshal(fmt.Sprintf("endpoint-%d", rank))
	return Register(ctx, Request{Addr: addr, JobID: "job", Secret: []byte(secret), World: world, Group: "g0",
		Member: Member{Rank: rank, Endpoint: ep, Settings: settings}})
}

func TestEveryRankGetsTheWholeTable(t *testing.T) {
	addr := serve(t, 4)
	var wg sync.WaitGroup
	tables := make([][]Member, 4)
	errs := make([]error, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tables[r], errs[r] = join(addr, 4, r, "s3cret", map[string]string{"chunk": "1"})
		}()
	}
	wg.Wait()
	for r := 0; r < 4; r++ {
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

func TestWrongSecretIsRefusedAndRightOnesStillJoin(t *testing.T) {
	addr := serve(t, 2)
	if _, err := join(addr, 2, 1, "guess", nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("impostor: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[r] = join(addr, 2, r, "s3cret", nil) }()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("%v", errs)
	}
}

func TestDisagreeingSettingsAreNamed(t *testing.T) {
	addr := serve(t, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = join(addr, 2, r, "s3cret", map[string]string{"channels": fmt.Sprint(r + 1)})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "channels") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestBadRegistrationsAreRefused(t *testing.T) {
	addr := serve(t, 2)
	if _, err := join(addr, 3, 0, "s3cret", nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("wrong world size: %v", err)
	}
	if _, err := join(addr, 2, 5, "s3cret", nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("rank outside world: %v", err)
	}
}

func TestRegisterHonoursItsDeadline(t *testing.T) {
	addr := serve(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Register(ctx, Request{Addr: addr, JobID: "job", Secret: []byte("s3cret"), World: 2, Group: "g", Member: Member{Rank: 0, Endpoint: json.RawMessage(`""`)}})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Minute {
		t.Fatalf("waited %v: %v; want its 200 ms deadline to end it", time.Since(start), err)
	}
}

func TestOversizedMessageIsRejected(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		_, _ = b.Write([]byte{0xff, 0xff, 0xff, 0x7f})
		b.Close()
	}()
	var v reply
	if err := readMsg(a, &v, MaxMessage); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("got %v", err)
	}
}

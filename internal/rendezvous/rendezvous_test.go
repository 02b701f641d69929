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

// Issue 31: ranks started by hand with different WORLD_SIZEs. The one
// with the wrong size is refused, and so is every rank of the job, at once
// and with the reason — whether it was waiting already or registers after
// — instead of waiting for a rank that cannot come. The misfit registering
// again as it should clears the way.
func TestAMisfitRankFailsTheWholeJobAtOnce(t *testing.T) {
	for _, misfitFirst := range []bool{false, true} {
		addr := serve(t, 3)
		want := "rank 1 was started with world size 4, this job has 3 ranks: give every rank the same WORLD_SIZE"
		early := make(chan error, 1)
		if !misfitFirst {
			// Rank 0 waits for the others; the misfit's refusal reaches it.
			go func() { _, err := join(addr, 3, 0, "s3cret", nil); early <- err }()
		}
		if _, err := join(addr, 4, 1, "s3cret", nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "world size 4, this job has 3 ranks") {
			t.Fatalf("the misfit: %v", err)
		}
		if misfitFirst {
			go func() { _, err := join(addr, 3, 0, "s3cret", nil); early <- err }()
		}
		if err := <-early; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("misfit first %v: rank 0: %v, want refused with %q", misfitFirst, err, want)
		}
		// Rank 2 registering later is refused too; then rank 1 comes with
		// the right size and the job forms.
		if _, err := join(addr, 3, 2, "s3cret", nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("rank 2: %v", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Ranks 0 and 2 may register before rank 1 has cleared
				// its misfit: refused with it, they try again.
				for try := 0; try < 1000; try++ {
					if _, errs[r] = join(addr, 3, r, "s3cret", nil); errs[r] == nil || !strings.Contains(errs[r].Error(), want) || r == 1 {
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("misfit first %v: after rank 1 came right: %v", misfitFirst, err)
		}
	}
}

func TestARankOutsideTheWorldFailsTheJob(t *testing.T) {
	addr := serve(t, 2)
	early := make(chan error, 1)
	go func() { _, err := join(addr, 2, 0, "s3cret", nil); early <- err }()
	if _, err := join(addr, 2, 5, "s3cret", nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("rank 5 of 2: %v", err)
	}
	if err := <-early; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "a rank was started as rank 5, outside 0..1") {
		t.Fatalf("rank 0: %v", err)
	}
}

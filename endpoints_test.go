package ringtail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
)

// A rank that serves beyond loopback wants the job's endpoint token, and
// /debug/flight answers while a collective is blocked on a silent peer (a
// reader waits on no lock the call holds): the live dump shows the call
// running, waiting on the peer that has not called. When the peer calls,
// the collective completes with the right sum.
func TestDebugFlightAnswersWhileACallIsBlockedOnASilentPeer(t *testing.T) {
	comms := startComms(t, 2, func(c *Config) {
		c.MetricsAddr = "0.0.0.0:0"
		c.OpTimeout = 5 * time.Minute // the blocked call must outlast the test's reads
	})
	_, port, err := net.SplitHostPort(comms[0].MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", port) + "/debug/flight?last=2"
	token := obs.Token([]byte("test-secret-0123456")) // startComms's secret
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := func(auth string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("/debug/flight while a call is blocked: %v", err)
		}
		defer resp.Body.Close()
		var b json.RawMessage
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, b
	}

	noErrors(t, each(comms, func(r int, c *Comm) error {
		return c.AllReduce(ctx, Float32s(make([]float32, 8)), Sum)
	}))
	buf := []float32{1, 2, 3}
	done := make(chan error, 1)
	go func() { done <- comms[0].AllReduce(ctx, Float32s(buf), Sum) }()

	var live flight.Dump
	for {
		code, b := read("Bearer " + token)
		if code != http.StatusOK {
			t.Fatalf("/debug/flight with the token: %d", code)
		}
		live = flight.Dump{}
		if err := json.Unmarshal(b, &live); err != nil {
			t.Fatal(err)
		}
		if n := len(live.Entries); !live.Partial && n == 2 && live.Entries[1].State == "running" && live.Entries[1].WaitingOn != nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the call ended (%v) although rank 1 never called", err)
		case <-ctx.Done():
			t.Fatalf("/debug/flight never showed the blocked call: last read %+v", live)
		case <-time.After(20 * time.Millisecond): // the next read
		}
	}
	if e := live.Entries[1]; e.Call != live.Entries[0].Call+1 || e.Collective != "AllReduce" || e.Count != 3 || *e.WaitingOn != 1 {
		t.Fatalf("the blocked call: %+v", e)
	}
	for _, auth := range []string{"", "Bearer " + obs.Token([]byte("not-the-secret-0123456"))} {
		if code, _ := read(auth); code != http.StatusUnauthorized {
			t.Fatalf("/debug/flight with %q: %d, want 401", auth, code)
		}
	}

	other := []float32{10, 20, 30}
	if err := comms[1].AllReduce(ctx, Float32s(other), Sum); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(buf) != "[11 22 33]" || fmt.Sprint(other) != "[11 22 33]" {
		t.Fatalf("sums %v %v", buf, other)
	}
}

// A rank told to serve beyond loopback without a job secret is refused
// before it joins, naming the variable and the fix.
func TestMetricsBeyondLoopbackWithoutASecretIsRefused(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":9400+", "[::]:0"} {
		cfg := Config{Rank: 0, WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 1, JobID: "x", Insecure: true, MetricsAddr: addr}
		_, err := New(context.Background(), cfg)
		if !errors.Is(err, obs.ErrOpenEndpoint) || !strings.Contains(err.Error(), EnvMetricsAddr) || !strings.Contains(err.Error(), EnvSecret) {
			t.Errorf("%s without a secret: %v", addr, err)
		}
	}
}

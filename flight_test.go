package ringtail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/assemble"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// waitDumps waits (at most a minute: the dumps of ranks that were between
// calls are written by their recorders' goroutines) for n dumps in dir and
// returns them.
func waitDumps(t *testing.T, dir string, n int) []*flight.Dump {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		names, _ := filepath.Glob(filepath.Join(dir, "ringtail-flight.*.json"))
		if len(names) >= n {
			dumps, err := flight.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			return dumps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dumps in %s after a minute: %v", len(names), n, dir, names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A rank that stops calling: the others wait in the call it never makes
// and fail when their operation timeout passes; every rank leaves a dump
// (the one that stopped, too: its peers' aborts fail its communicator
// while it is between calls), and Analyze names the rank and the call it
// never made. RINGTAIL_FLIGHT_DIR acts on NewLocal's communicators.
func TestARankThatStopsCallingLeavesADumpPerRankThatNamesIt(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvFlightDir, dir)
	comms := startComms(t, 4, func(c *Config) { c.OpTimeout = 3 * time.Second })
	ctx := context.Background()
	others := make(chan struct{})
	errs := each(comms, func(r int, c *Comm) error {
		buf := make([]float32, 1024)
		for range 6 {
			if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
				return err
			}
		}
		if r == 3 {
			<-others // stopped calling: busy elsewhere until the others gave up
			return nil
		}
		err := c.AllReduce(ctx, Float32s(buf), Sum)
		if r == 0 {
			close(others)
		}
		return err
	})
	// The error blames the peer each rank waited on when its timeout
	// passed (rank 0 waits on rank 2, which waits on rank 3); the dumps
	// tell which rank stopped.
	for r := range 3 {
		if _, ok := RankOf(errs[r]); !ok {
			t.Fatalf("rank %d: %v, want an error blaming a rank", r, errs[r])
		}
	}
	dumps := waitDumps(t, dir, 4)
	rep := flight.Analyze(dumps)
	text := strings.Join(rep.Lines, "\n")
	t.Logf("ringtail debug analyze:\n%s", text)
	if !slices.Equal(rep.Culprits, []int{3}) {
		t.Errorf("culprits %v, want [3]", rep.Culprits)
	}
	// Call #1 of the world agreed on the transport; the application's
	// sixth allreduce is #7.
	for _, want := range []string{"rank 3 completed AllReduce #7 (count=1024, float32, sum) and never called #8", "ranks 0,1,2 waited in AllReduce #8"} {
		if !strings.Contains(text, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

// A rank that calls with another count: every rank fails, and Analyze
// finds the first call where the ranks disagree.
func TestAMismatchLeavesDumpsThatNameTheCall(t *testing.T) {
	dir := t.TempDir()
	comms := startComms(t, 3, func(c *Config) { c.FlightDir = dir })
	ctx := context.Background()
	errs := each(comms, func(r int, c *Comm) error {
		buf := make([]float32, 1024)
		for i := range 4 {
			b := buf
			if r == 1 && i == 3 {
				b = buf[:1000]
			}
			if err := c.AllReduce(ctx, Float32s(b), Sum); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: no error", r)
		}
	}
	rep := flight.Analyze(waitDumps(t, dir, 3))
	text := strings.Join(rep.Lines, "\n")
	t.Logf("ringtail debug analyze:\n%s", text)
	if !slices.Equal(rep.Culprits, []int{1}) {
		t.Errorf("culprits %v, want [1]", rep.Culprits)
	}
	for _, want := range []string{"ranks disagree at call #5", "rank 1 called AllReduce #5 (count=1000, float32, sum)", "ranks 0,2 called AllReduce #5 (count=1024, float32, sum)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

// lineOf returns the line of the call below it (for the call sites the
// check must name).
func lineOf() int {
	_, _, line, _ := runtime.Caller(1)
	return line + 1
}

// Under RINGTAIL_DEBUG=detail a rank that skips one of two allreduces of
// the same shape fails on every rank, and every error names both call
// sites and blames the rank that skipped.
func TestDetailCatchesASkippedCallOfTheSameShape(t *testing.T) {
	t.Setenv(EnvDebug, "detail")
	comms := startComms(t, 3, nil)
	ctx := context.Background()
	var lines [3][2]int
	errs := each(comms, func(r int, c *Comm) error {
		buf := make([]float32, 256)
		for step := range 3 {
			if !(r == 2 && step == 1) {
				lines[r][0] = lineOf()
				if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
					return err
				}
			}
			lines[r][1] = lineOf()
			if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
				return err
			}
		}
		return nil
	})
	lineA, lineB := lines[0][0], lines[0][1]
	siteA, siteB := fmt.Sprintf("flight_test.go:%d", lineA), fmt.Sprintf("flight_test.go:%d", lineB)
	for r, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMismatch || e.Rank != 2 {
			t.Fatalf("rank %d: %v, want a mismatch blaming rank 2", r, err)
		}
		if !strings.Contains(e.Detail, siteA) || !strings.Contains(e.Detail, siteB) || !strings.Contains(e.Detail, "rank 2 from") {
			t.Errorf("rank %d's error does not name both call sites (%s, %s): %v", r, siteA, siteB, err)
		}
	}
}

// Without detail, calls carry no call site, and the same program runs.
func TestCallSitesAreCheckedOnlyUnderDetail(t *testing.T) {
	comms := startComms(t, 3, func(c *Config) { c.Debug = "detail" })
	ctx := context.Background()
	noErrors(t, each(comms, func(r int, c *Comm) error {
		buf := []float32{float32(r + 1)}
		// One call site: agreed.
		if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
			return err
		}
		if buf[0] != 6 {
			return fmt.Errorf("sum %v", buf[0])
		}
		// A subgroup's members check among themselves.
		if r != 1 {
			sub := []float32{float32(r)}
			if err := c.AllReduceAmong(ctx, Float32s(sub), Sum, []int{0, 2}); err != nil {
				return err
			}
			if sub[0] != 2 {
				return fmt.Errorf("subgroup sum %v", sub[0])
			}
		}
		// A binding names its own call sites: the same name agrees
		// whatever the Go stack.
		site := WithCallSite(ctx, "train.py:42 (step)")
		if r == 0 {
			return c.Broadcast(site, Float32s(buf), 0)
		}
		return c.Broadcast(site, Float32s(buf), 0)
	}))
	if !comms[0].detail {
		t.Fatal("Config.Debug detail did not turn the check on")
	}
	plain := startComms(t, 1, nil)
	if plain[0].detail {
		t.Fatal("the check is on without RINGTAIL_DEBUG")
	}
}

// SIGUSR1 dumps every recorder of the process; /debug/flight serves one
// rank's live.
func TestSignalAndHTTPDumps(t *testing.T) {
	dir := t.TempDir()
	comms := startComms(t, 2, func(c *Config) { c.FlightDir, c.MetricsAddr = dir, "127.0.0.1:0" })
	ctx := context.Background()
	noErrors(t, each(comms, func(r int, c *Comm) error {
		for range 5 {
			if err := c.AllReduce(ctx, Float32s(make([]float32, 8)), Sum); err != nil {
				return err
			}
		}
		return nil
	}))
	resp, err := http.Get("http://" + comms[1].MetricsAddr() + "/debug/flight?last=3")
	if err != nil {
		t.Fatal(err)
	}
	var live flight.Dump
	err = json.NewDecoder(resp.Body).Decode(&live)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if live.Rank != 1 || live.Reason != "live" || len(live.Entries) != 3 || live.Entries[2].Call != 6 || live.Entries[2].State != "done" {
		t.Fatalf("/debug/flight: %+v", live)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for _, d := range waitDumps(t, dir, 2) {
		if d.Reason != "signal" || len(d.Entries) != 6 {
			t.Errorf("rank %d's dump on SIGUSR1: reason %q, %d entries", d.Rank, d.Reason, len(d.Entries))
		}
	}
}

// The debugging settings: the variables fill unset fields, "0" turns the
// recorder off, and bad values are refused with the variable's name.
func TestDebugSettingsFromTheEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made", "by", "new")
	t.Setenv(EnvFlightDir, dir)
	t.Setenv(EnvFlightSize, "0")
	t.Setenv(EnvDebug, "DETAIL")
	def := DefaultConfig(0, 1)
	cfg := envcfg.Comm(def)
	if err := cfg.WithProcessDebug(); err != nil {
		t.Fatal(err)
	}
	if cfg.FlightDir != dir || cfg.FlightSize != -1 || !cfg.Detail() {
		t.Fatalf("from the environment: %q %d %q", cfg.FlightDir, cfg.FlightSize, cfg.Debug)
	}
	if fl, err := assemble.FlightRecorder(&cfg); err != nil || fl != nil {
		t.Fatalf("RINGTAIL_FLIGHT_SIZE=0: recorder %v, %v", fl, err)
	}
	cfg.FlightSize = 10
	if _, err := assemble.FlightRecorder(&cfg); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the dump directory was not made: %v", err)
	}
	explicit := envcfg.Comm(def)
	explicit.FlightDir, explicit.Debug = t.TempDir(), "off"
	if err := explicit.WithProcessDebug(); err != nil || explicit.FlightDir == dir || explicit.Detail() {
		t.Fatalf("the variables override a configured field: %+v", explicit)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	bad := DefaultConfig(0, 1)
	bad.Debug, bad.FlightSize, bad.FlightDir = "verbose", flight.MaxSize+1, file
	err := bad.Validate()
	for _, want := range []string{EnvDebug, EnvFlightSize, EnvFlightDir} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate does not name %s: %v", want, err)
		}
	}
	t.Setenv(EnvFlightSize, "lots")
	if c := envcfg.Comm(def); c.WithProcessDebug() == nil {
		t.Error("RINGTAIL_FLIGHT_SIZE=lots accepted")
	}
}

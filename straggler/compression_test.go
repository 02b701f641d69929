package straggler

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestCompressionPays(t *testing.T) {
	const (
		mib     = 1 << 20
		mbit100 = 100e6 / 8 // bytes/s
		gbit10  = 10e9 / 8
		gbps    = 1e9 // encode throughput, bytes/s
	)
	cases := []struct {
		name                   string
		plain                  int64
		bandwidth, ratio, rate float64
		speedup, margin        float64
		pays                   bool
		saved, cost            time.Duration // when non-zero: the estimates, to the millisecond
	}{
		{"sparse 16 MiB over 100 Mbit/s", 16 * mib, mbit100, 0.15, gbps, 2, 1.2, true, 1140 * time.Millisecond, 25 * time.Millisecond},
		{"sparse 4 MiB over 50 Mbit/s", 4 * mib, mbit100 / 2, 0.2, gbps, 2, 1.2, true, 537 * time.Millisecond, 6 * time.Millisecond},
		{"dense: nothing saved", 16 * mib, mbit100, 1, gbps, 2, 1.2, false, 0, 25 * time.Millisecond},
		{"a ratio above 1 saves nothing", 16 * mib, mbit100, 1.01, gbps, 2, 1, false, 0, 0},
		{"sparse over 10 Gbit/s: the link is faster than the codec", 16 * mib, gbit10, 0.15, gbps, 2, 1.2, false, 11 * time.Millisecond, 25 * time.Millisecond},
		{"a slow encoder on a fast link", 16 * mib, 1e9, 0.5, 0.1e9, 2, 1, false, 0, 0},
		{"just pays without a margin", 1e6, 1e6, 0.5, 3.1e6, 2, 1, true, 500 * time.Millisecond, 484 * time.Millisecond},
		{"unknown bandwidth", 16 * mib, 0, 0.15, gbps, 2, 1.2, false, 0, 0},
		{"NaN bandwidth", 16 * mib, math.NaN(), 0.15, gbps, 2, 1.2, false, 0, 0},
		{"unmeasured ratio", 16 * mib, mbit100, 0, gbps, 2, 1.2, false, 0, 0},
		{"unmeasured rate", 16 * mib, mbit100, 0.15, 0, 2, 1.2, false, 0, 0},
		{"empty message", 0, mbit100, 0.15, gbps, 2, 1.2, false, 0, 0},
	}
	for _, c := range cases {
		pays, saved, cost := CompressionPays(c.plain, c.bandwidth, c.ratio, c.rate, c.speedup, c.margin)
		if pays != c.pays {
			t.Errorf("%s: pays %v (saved %v, cost %v), want %v", c.name, pays, saved, cost, c.pays)
		}
		near := func(got, want time.Duration) bool {
			return want == 0 || (got-want).Abs() <= time.Millisecond
		}
		if !near(saved, c.saved) || !near(cost, c.cost) {
			t.Errorf("%s: saved %v cost %v, want %v and %v", c.name, saved, cost, c.saved, c.cost)
		}
	}
	// The margin: saved (0.55 s) is 1.1× the cost (0.5 s).
	if pays, _, _ := CompressionPays(1e6, 1e6, 0.45, 3e6, 2, 1.2); pays {
		t.Error("paid with saved = 1.1 × cost under a margin of 1.2")
	}
	if pays, _, _ := CompressionPays(1e6, 1e6, 0.45, 3e6, 2, 1.05); !pays {
		t.Error("did not pay with saved = 1.1 × cost under a margin of 1.05")
	}
}

// observe feeds a measurement or fails the test.
func observe(t *testing.T, c *Compression, plain, wire int64, encode time.Duration) {
	t.Helper()
	if err := c.Observe(plain, wire, encode); err != nil {
		t.Fatal(err)
	}
}

// A dense gradient is measured once, declined, and re-measured every
// SampleEvery-th message; a sparse one is compressed every time; without
// a bandwidth nothing is compressed, not even a sample.
func TestCompressionSamplesThenDecides(t *testing.T) {
	const plain, bw = 4 << 20, 12.5e6
	c, err := NewCompression(CompressionConfig{SampleEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Decide(plain, 0); d != (CompressionDecision{}) {
		t.Fatalf("unknown bandwidth: %+v", d)
	}
	if d := c.Decide(plain, bw); !d.Compress || !d.Sample || d.Pays {
		t.Fatalf("first message: %+v, want a sample", d)
	}
	observe(t, c, plain, plain, 2*time.Millisecond) // dense: nothing saved
	var got []bool
	for range 9 {
		d := c.Decide(plain, bw)
		if d.Pays || d.Compress != d.Sample {
			t.Fatalf("dense: %+v", d)
		}
		got = append(got, d.Compress)
	}
	want := []bool{false, false, false, true, false, false, false, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("dense: compressed %v, want %v", got, want)
		}
	}
	// The gradient turns sparse: the next sample's measurement (and the
	// moving average) makes compression pay, every message from then on.
	for !c.Decide(plain, bw).Sample {
	}
	observe(t, c, plain, plain/10, 2*time.Millisecond)
	if r := c.Ratio(); math.Abs(r-(0.3*0.1+0.7*1)) > 1e-6 {
		t.Fatalf("ratio %v after 1 then 0.1 with alpha 0.3", r)
	}
	for range 5 {
		d := c.Decide(plain, bw)
		if !d.Compress || d.Sample || !d.Pays || d.Saved <= d.Cost {
			t.Fatalf("sparse: %+v (ratio %v, rate %v)", d, c.Ratio(), c.EncodeRate())
		}
	}
	if c.Measured() != 2 || math.Abs(c.EncodeRate()-plain/2e-3) > 1 {
		t.Fatalf("measured %d, rate %v", c.Measured(), c.EncodeRate())
	}
}

func TestCompressionRejectsBadInput(t *testing.T) {
	for _, cfg := range []CompressionConfig{
		{SampleEvery: -1}, {Alpha: 1.5}, {Alpha: -0.1}, {DecodeSpeedup: -1}, {DecodeSpeedup: math.Inf(1)},
		{Margin: 0.5}, {Margin: math.NaN()},
	} {
		if _, err := NewCompression(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	c, err := NewCompression(CompressionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][3]int64{{0, 0, 1}, {10, -1, 1}, {10, 5, -1}} {
		if err := c.Observe(m[0], m[1], time.Duration(m[2])); !errors.Is(err, ErrBadObservation) {
			t.Errorf("observe %v: %v", m, err)
		}
	}
	if c.Measured() != 0 {
		t.Fatal("a rejected observation was folded in")
	}
	// An encode below the clock's resolution does not make the rate infinite.
	observe(t, c, 1000, 100, 0)
	if r := c.EncodeRate(); math.IsInf(r, 0) || r != 1e9 {
		t.Fatalf("rate %v", r)
	}
}

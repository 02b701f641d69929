package straggler

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func arrivalsMs(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(ms))
	}
	return out
}

// flat is a reduction time that depends only on the number of members:
// the ring's 2(k−1)/k of c (c: the time at two ranks' worth of transfer).
func flat(c time.Duration) func([]int) time.Duration {
	return func(m []int) time.Duration {
		k := len(m)
		if k <= 1 {
			return 0
		}
		return time.Duration(float64(c) * float64(k-1) / float64(k))
	}
}

func equalShares(n, s int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// With every rank on time, the ring: nothing to overlap (no rank
// predicted late) or evict.
func TestRingWhenEveryoneArrivesTogether(t *testing.T) {
	in := ModeInput{Arrivals: arrivalsMs(100, 100, 100, 100), Shares: equalShares(4, 64), Collective: flat(100 * ms),
		Phi: 256, Threshold: 0.2, MaxEvict: 2, Evict: true, Overlap: true}
	ch, err := ChooseMode(in)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Mode != ModeRing || len(ch.Stragglers) != 0 || ch.Time != 175*ms || len(ch.Costs) != 1 {
		t.Fatalf("choice %+v: want the ring at 100+75 ms, no late rank to overlap, no eviction candidate", ch)
	}
}

// STAR's case: one rank 3× slow. The ring waits for it; evicted, it
// computes at its own pace and its samples still count at the rate it
// keeps up: T = 100 + C(3), B = 192 + 64·T/cycle.
func TestEvictingTheStragglerWorkedExample(t *testing.T) {
	in := ModeInput{Arrivals: arrivalsMs(100, 100, 300, 100), Shares: equalShares(4, 64), Collective: flat(60 * ms),
		Cycle: arrivalsMs(0, 0, 350, 0), Phi: 256, Threshold: 0.2, MaxEvict: 2, Evict: true}
	ch, err := ChooseMode(in)
	if err != nil {
		t.Fatal(err)
	}
	ringT := 300*ms + 45*ms
	evictT := 100*ms + 40*ms
	b := 192 + 64*float64(evictT)/float64(350*ms)
	if ch.Mode != ModeEvict || !slices.Equal(ch.Evicted, []int{2}) || ch.Time != evictT || math.Abs(ch.Samples-b) > 1e-9 {
		t.Fatalf("choice %+v: want rank 2 evicted, T=%v, B=%v", ch.ModeCost, evictT, b)
	}
	if want := (1 + 256/b) * evictT.Seconds(); math.Abs(ch.Cost-want) > 1e-12 {
		t.Fatalf("cost %v, want %v", ch.Cost, want)
	}
	if ring := ch.Costs[0]; ring.Mode != ModeRing || ring.Time != ringT || ring.Cost != 2*ringT.Seconds() {
		t.Fatalf("ring candidate %+v", ring)
	}
	if !slices.Equal(ch.Stragglers, []int{2}) || !slices.Equal(ch.Members, []int{0, 1, 3}) {
		t.Fatalf("stragglers %v members %v", ch.Stragglers, ch.Members)
	}
}

// A rank late by about one ring time: the others reduce-scatter while it
// computes, and the exact mode beats waiting.
func TestOverlapHidesOneLateRank(t *testing.T) {
	in := ModeInput{Arrivals: arrivalsMs(100, 100, 100, 100, 100, 100, 100, 160), Shares: equalShares(8, 32),
		Collective: flat(70 * ms), Phi: 256, Threshold: 0.2, MaxEvict: 0, Overlap: true}
	ch, err := ChooseMode(in)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Mode != ModeOverlap || ch.Late != 7 || ch.Time >= ch.Costs[0].Time {
		t.Fatalf("choice %+v: want the overlap, waiting for rank 7, faster than the ring %v", ch.ModeCost, ch.Costs[0].Time)
	}
}

// A rank on time but behind a slow link: among the link-ordered
// candidates, evicting it makes the ring fast.
func TestEvictingTheRankBehindTheSlowLink(t *testing.T) {
	coll := func(m []int) time.Duration {
		if slices.Contains(m, 1) {
			return 500 * ms
		}
		return flat(60 * ms)(m)
	}
	in := ModeInput{Arrivals: arrivalsMs(100, 100, 100, 100), Shares: equalShares(4, 16), Collective: coll,
		Cycle: arrivalsMs(0, 400, 0, 0), Phi: 64, Threshold: 0.2, MaxEvict: 2, Evict: true, WorstLinks: []int{1, 0, 2, 3}}
	ch, err := ChooseMode(in)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Mode != ModeEvict || !slices.Equal(ch.Evicted, []int{1}) {
		t.Fatalf("choice %+v: want rank 1 evicted", ch.ModeCost)
	}
}

func TestChooseModeRejectsBadInput(t *testing.T) {
	good := ModeInput{Arrivals: arrivalsMs(1, 2), Shares: []int{1, 1}, Collective: flat(ms), Phi: 1}
	for name, mutate := range map[string]func(*ModeInput){
		"no arrivals":   func(in *ModeInput) { in.Arrivals, in.Shares = nil, nil },
		"short shares":  func(in *ModeInput) { in.Shares = []int{1} },
		"no collective": func(in *ModeInput) { in.Collective = nil },
		"negative φ":    func(in *ModeInput) { in.Phi = -1 },
		"infinite φ":    func(in *ModeInput) { in.Phi = math.Inf(1) },
		"short cycles":  func(in *ModeInput) { in.Cycle = arrivalsMs(1) },
		"short ranks":   func(in *ModeInput) { in.Ranks = []int{0} },
	} {
		in := good
		mutate(&in)
		if _, err := ChooseMode(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// With a reduction time that depends only on the number of members, no
// set of evicted ranks (brute force over every subset, by the same cost
// formula) beats the choice: evicting the latest arrivals is enough.
func TestChooseModeMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.IntN(5)
		arr := make([]time.Duration, n)
		shares := make([]int, n)
		for r := range arr {
			arr[r] = time.Duration(50+rng.IntN(400)) * ms
			shares[r] = 1 + rng.IntN(40)
		}
		coll := flat(time.Duration(10+rng.IntN(200)) * ms)
		in := ModeInput{Arrivals: arr, Shares: shares, Collective: coll, Phi: float64(rng.IntN(500)),
			Threshold: 0.2, MaxEvict: n - 1, Evict: true}
		ch, err := ChooseMode(in)
		if err != nil {
			t.Fatal(err)
		}
		best := math.Inf(1)
		cAll := coll(allRanks(n))
		for mask := 0; mask < 1<<n-1; mask++ { // every proper subset evicted
			var members []int
			slowest, b := time.Duration(0), 0.0
			for r := 0; r < n; r++ {
				if mask&(1<<r) == 0 {
					members = append(members, r)
					slowest = max(slowest, arr[r])
					b += float64(shares[r])
				}
			}
			tt := slowest + coll(members)
			for r := 0; r < n; r++ {
				if mask&(1<<r) != 0 {
					b += float64(shares[r]) * math.Min(1, float64(tt)/float64(arr[r]+cAll))
				}
			}
			// Only sets of predicted stragglers are offered; skip the others.
			offered := true
			for r := 0; r < n; r++ {
				if mask&(1<<r) != 0 && !slices.Contains(ch.Stragglers, r) {
					offered = false
				}
			}
			if offered {
				best = math.Min(best, (1+in.Phi/b)*tt.Seconds())
			}
		}
		if ch.Cost > best*(1+1e-9) {
			t.Fatalf("trial %d: chose %+v at %v, a subset costs %v", trial, ch.ModeCost, ch.Cost, best)
		}
	}
}

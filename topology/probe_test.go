package topology

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

// A 50 µs link at 10 GB/s, probed with pings and 1 MiB transfers, with one
// GC pause on each probe size. The medians ignore the pauses.
func TestEstimateLinks_MediansIgnoreOutliers(t *testing.T) {
	const lat = 50 * time.Microsecond
	const bw = 10e9
	big := int64(1 << 20)
	bigDur := lat + time.Duration(float64(big)/bw*1e9)
	var samples []ProbeSample
	for i := 0; i < 5; i++ {
		jitter := time.Duration(i-2) * time.Microsecond
		samples = append(samples,
			ProbeSample{From: 1, To: 2, Bytes: 0, Duration: lat + jitter},
			ProbeSample{From: 1, To: 2, Bytes: big, Duration: bigDur + jitter})
	}
	samples = append(samples,
		ProbeSample{From: 1, To: 2, Bytes: 0, Duration: 40 * time.Millisecond},
		ProbeSample{From: 1, To: 2, Bytes: big, Duration: 90 * time.Millisecond})
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })

	est, err := EstimateLinks(3, samples)
	if err != nil {
		t.Fatal(err)
	}
	if got := est.Latency[1][2]; !near(got, lat.Seconds(), 0.05) {
		t.Errorf("latency %v s, want ≈%v", got, lat.Seconds())
	}
	if got := est.Bandwidth[1][2]; !near(got, bw, 0.05) {
		t.Errorf("bandwidth %v B/s, want ≈%v", got, bw)
	}
	if est.Samples[1][2] != 12 || est.Samples[2][1] != 0 {
		t.Errorf("sample counts %v", est.Samples)
	}
	if est.Latency[2][1] != 0 || est.Bandwidth[2][1] != 0 {
		t.Error("unprobed direction must read 0 (not measured)")
	}
	if err := est.Bandwidth.Validate(); err != nil {
		t.Error(err)
	}
}

func TestEstimateLinks_SingleProbeSize(t *testing.T) {
	est, err := EstimateLinks(2, []ProbeSample{
		{From: 0, To: 1, Bytes: 1000, Duration: time.Millisecond},
		{From: 0, To: 1, Bytes: 1000, Duration: 2 * time.Millisecond},
		{From: 0, To: 1, Bytes: 1000, Duration: time.Second},
		{From: 1, To: 0, Bytes: 0, Duration: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if est.Latency[0][1] != 2e-3 || est.Bandwidth[0][1] != 5e5 {
		t.Errorf("one size: latency %v bandwidth %v, want 2e-3 and median 1000 B / 2 ms", est.Latency[0][1], est.Bandwidth[0][1])
	}
	if est.Latency[1][0] != 1e-3 || est.Bandwidth[1][0] != 0 {
		t.Errorf("pings only: latency %v bandwidth %v, want 1e-3 and unknown", est.Latency[1][0], est.Bandwidth[1][0])
	}
}

func TestEstimateLinks_RejectsBadSamples(t *testing.T) {
	for name, s := range map[string]ProbeSample{
		"self":          {From: 1, To: 1, Bytes: 1, Duration: 1},
		"out of range":  {From: 0, To: 2, Bytes: 1, Duration: 1},
		"negative size": {From: 0, To: 1, Bytes: -1, Duration: 1},
		"zero duration": {From: 0, To: 1, Bytes: 1, Duration: 0},
	} {
		if _, err := EstimateLinks(2, []ProbeSample{s}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", name, err)
		}
	}
	if _, err := EstimateLinks(-1, nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("n=-1: err = %v", err)
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("odd: %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even: %v", m)
	}
}

// A fast link whose large probes took less than the small probes' noisy
// latency must not be estimated from the small probes (8 bytes over a
// millisecond would make the fastest link the slowest of the job): its
// estimate is the large probes' bytes over duration.
func TestEstimateLinksFastLinkWithNoisyLatency(t *testing.T) {
	ms := time.Millisecond
	samples := []ProbeSample{
		{From: 0, To: 1, Bytes: 8, Duration: 2 * ms}, // descheduled echoes
		{From: 0, To: 1, Bytes: 8, Duration: 3 * ms},
		{From: 0, To: 1, Bytes: 8, Duration: 2 * ms},
		{From: 0, To: 1, Bytes: 1 << 20, Duration: ms / 2},
		{From: 0, To: 1, Bytes: 1 << 20, Duration: ms},
		{From: 0, To: 1, Bytes: 1 << 20, Duration: ms / 2},
	}
	est, err := EstimateLinks(2, samples)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := est.Bandwidth[0][1], float64(1<<20)/(ms/2).Seconds(); got != want {
		t.Fatalf("bandwidth %v B/s, want the large probes' %v", got, want)
	}
}

package topology

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// ProbeSample is one timed transfer from rank From to rank To: Bytes moved
// in Duration, measured by the probing code (which is I/O and lives
// elsewhere).
type ProbeSample struct {
	// From is the sending rank.
	From int
	// To is the receiving rank.
	To int
	// Bytes is the payload size, >= 0. Zero-byte or tiny probes measure
	// latency; large ones measure bandwidth.
	Bytes int64
	// Duration is the time the transfer took, > 0.
	Duration time.Duration
}

// LinkEstimates are per-pair estimates from probe samples. An entry of 0
// means the pair was not probed (or, for bandwidth, could not be
// estimated).
type LinkEstimates struct {
	// Latency[i][j] is the latency from i to j in seconds.
	Latency Matrix
	// Bandwidth[i][j] is the bandwidth from i to j in bytes per second.
	Bandwidth Matrix
	// Samples[i][j] is how many samples the pair had.
	Samples [][]int
}

// EstimateLinks turns probe samples among n ranks into latency and
// bandwidth estimates, per ordered pair, with medians so that a few
// outliers (a GC pause, a retransmit) do not move them. Transfer time is
// modelled as latency + bytes/bandwidth:
//
//   - latency is the median duration of the pair's smallest probes (those
//     with the fewest bytes);
//   - bandwidth is the median, over the pair's larger probes, of
//     (bytes - smallest bytes) / (duration - latency); larger probes not
//     slower than the latency are ignored;
//   - when no larger probe is slower than the latency (a link faster
//     than the latency's noise), bandwidth is the median bytes/duration
//     of the larger probes, a lower bound;
//   - with only one probe size, bandwidth is the median bytes/duration
//     (an underestimate that includes latency), or unknown (0) for
//     zero-byte probes.
//
// Samples may come in any order; the result does not depend on it. Errors
// wrap ErrInvalidInput: n < 0, a rank outside [0, n), From == To, negative
// Bytes or non-positive Duration.
func EstimateLinks(n int, samples []ProbeSample) (LinkEstimates, error) {
	if n < 0 {
		return LinkEstimates{}, fmt.Errorf("topology: estimate links: %w: n = %d", ErrInvalidInput, n)
	}
	for i, s := range samples {
		switch {
		case s.From < 0 || s.From >= n || s.To < 0 || s.To >= n:
			return LinkEstimates{}, fmt.Errorf("topology: estimate links: %w: sample %d: ranks %d→%d outside [0, %d)", ErrInvalidInput, i, s.From, s.To, n)
		case s.From == s.To:
			return LinkEstimates{}, fmt.Errorf("topology: estimate links: %w: sample %d: rank %d probes itself", ErrInvalidInput, i, s.From)
		case s.Bytes < 0 || s.Duration <= 0:
			return LinkEstimates{}, fmt.Errorf("topology: estimate links: %w: sample %d: %d bytes in %v", ErrInvalidInput, i, s.Bytes, s.Duration)
		}
	}
	sorted := slices.Clone(samples)
	slices.SortFunc(sorted, func(a, b ProbeSample) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To),
			cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.Duration, b.Duration))
	})
	est := LinkEstimates{Latency: NewMatrix(n), Bandwidth: NewMatrix(n), Samples: make([][]int, n)}
	for i := range est.Samples {
		est.Samples[i] = make([]int, n)
	}
	for len(sorted) > 0 {
		k := 1
		for k < len(sorted) && sorted[k].From == sorted[0].From && sorted[k].To == sorted[0].To {
			k++
		}
		pair := sorted[:k]
		sorted = sorted[k:]
		lat, bw := estimatePair(pair)
		i, j := pair[0].From, pair[0].To
		est.Latency[i][j], est.Bandwidth[i][j], est.Samples[i][j] = lat, bw, k
	}
	return est, nil
}

// estimatePair estimates one pair from its samples, sorted by bytes then
// duration.
func estimatePair(pair []ProbeSample) (latency, bandwidth float64) {
	small := pair[0].Bytes
	var smallDur []float64
	var rest []ProbeSample
	for _, s := range pair {
		if s.Bytes == small {
			smallDur = append(smallDur, s.Duration.Seconds())
		} else {
			rest = append(rest, s)
		}
	}
	latency = median(smallDur)

	var rates []float64
	for _, s := range rest {
		if dt := s.Duration.Seconds() - latency; dt > 0 {
			rates = append(rates, float64(s.Bytes-small)/dt)
		}
	}
	if len(rates) == 0 {
		// No larger probe was slower than the latency: the link moved them
		// faster than the latency's noise. Bytes over duration of the
		// largest probes is a lower bound of the right order; the small
		// probes' rate would say a fast link is the slowest of all.
		for _, s := range rest {
			rates = append(rates, float64(s.Bytes)/s.Duration.Seconds())
		}
	}
	if len(rates) == 0 && small > 0 {
		for _, d := range smallDur {
			rates = append(rates, float64(small)/d)
		}
	}
	if len(rates) > 0 {
		bandwidth = median(rates)
	}
	return latency, bandwidth
}

// median returns the median of xs (the mean of the middle two for an even
// count), sorting xs in place. xs must not be empty.
func median(xs []float64) float64 {
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

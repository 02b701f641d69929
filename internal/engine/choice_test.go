package engine

import (
	"testing"
	"time"
)

// A probe's large send takes about probeTarget at the rate measured so
// far: a 1 Gbit/s link keeps the fixed ceilings (its every-stream send
// of 4 MiB takes 34 ms), a 200 Mbit/s one is measured with sends of
// under a megabyte, a long round trip stretches the send to probeRTTs
// round trips, and nothing measured yet means the ceiling.
func TestAProbeSendTakesAboutTheTargetAtTheMeasuredRate(t *testing.T) {
	const gbit, ceiling = 125e6, 8 * probeStreamBytes
	for _, tc := range []struct {
		name      string
		rate, lat float64
		ceiling   int
		want      int
	}{
		{"nothing measured yet", 0, 1e-4, ceiling, ceiling},
		{"1 Gbit/s, one stream", gbit, 1e-4, probeLarge, probeLarge},
		{"1 Gbit/s, every stream", gbit, 1e-4, ceiling, ceiling},
		{"200 Mbit/s", gbit / 5, 1e-4, ceiling, int(gbit / 5 * probeTarget.Seconds())},
		{"100 Mbit/s, one stream", gbit / 10, 1e-4, probeLarge, int(gbit / 10 * probeTarget.Seconds())},
		{"10 Mbit/s: the floor", gbit / 100, 1e-4, ceiling, probeMin},
		{"200 Mbit/s, 50 ms away", gbit / 5, 0.05, ceiling, ceiling},
		{"200 Mbit/s, 3 ms away", gbit / 5, 0.003, ceiling, int(gbit / 5 * probeRTTs * 2 * 0.003)},
	} {
		got := probeBytes(tc.rate, tc.lat, tc.ceiling)
		if got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
		if tc.rate > 0 && got > probeMin && got < tc.ceiling {
			if took := time.Duration(float64(got) / tc.rate * float64(time.Second)); took < probeTarget-time.Millisecond {
				t.Errorf("%s: %d bytes take %v, under the target %v", tc.name, got, took, probeTarget)
			}
		}
	}
}

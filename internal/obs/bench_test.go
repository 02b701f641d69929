package obs

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// BenchmarkRecorderCall is what metrics add to one call (Begin and End,
// as the engine makes them; no timeline): timed, two monotonic clock
// reads and a histogram update on top of the counters; sampled out (calls
// are frequent), the counters only.
func BenchmarkRecorderCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		mask uint64
	}{{"timed", 0}, {"sampled-out", 1<<62 - 1}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := New(Config{Rank: 0, World: 2, HostProc: fakeProc(), Period: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			r.mask.Store(tc.mask)
			ci := exec.CallInfo{Desc: transport.Desc{Collective: wire.AllReduce}, Algorithm: "ring", Bytes: 8, Ranks: 2}
			b.ReportAllocs()
			for b.Loop() {
				r.Begin(ci)
				r.End(nil)
			}
		})
	}
}

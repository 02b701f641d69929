package ringtail

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAllReduce measures in-process ranks over the real transports
// (shared memory by default). Bytes/s is per-rank buffer size over time
// (algbw); allocations are counted on rank 0 per call.
func BenchmarkAllReduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{8, 64 << 10, 16 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, size), func(b *testing.B) { benchAllReduce(b, n, size, nil) })
		}
	}
}

// BenchmarkAllReduceObserved is BenchmarkAllReduce with metrics on (a
// Prometheus endpoint on a free port): the per-call cost of recording, and
// its allocations (none).
func BenchmarkAllReduceObserved(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, size := range []int{8, 64 << 10, 16 << 20} {
			b.Run(fmt.Sprintf("ranks=%d/bytes=%d", n, size), func(b *testing.B) {
				benchAllReduce(b, n, size, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
			})
		}
	}
}

// BenchmarkAllReduceTCP is BenchmarkAllReduce over TCP sockets (no
// shared memory, no unix sockets): the frame path between hosts, whose
// writer and reader must not allocate per chunk either.
func BenchmarkAllReduceTCP(b *testing.B) {
	for _, size := range []int{8, 16 << 20} {
		b.Run(fmt.Sprintf("ranks=2/bytes=%d", size), func(b *testing.B) {
			benchAllReduce(b, 2, size, func(c *Config) { c.DisableShm, c.DisableUnix = true, true })
		})
	}
}

// benchAllReduce runs b.N allreduces of size bytes on n in-process ranks
// configured by mutate.
func benchAllReduce(b *testing.B, n, size int, mutate func(*Config)) {
	comms := startComms(b, n, mutate)
	bufs := make([][]float32, n)
	for r := range bufs {
		bufs[r] = make([]float32, size/4)
	}
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	errs := make(chan error, n)
	for r := 1; r < n; r++ {
		go func(r int) {
			for i := 0; i < b.N; i++ {
				if err := comms[r].AllReduce(ctx, Float32s(bufs[r]), Sum); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(r)
	}
	for i := 0; i < b.N; i++ {
		if err := comms[0].AllReduce(ctx, Float32s(bufs[0]), Sum); err != nil {
			b.Fatal(err)
		}
	}
	for r := 1; r < n; r++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

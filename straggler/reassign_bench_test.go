package straggler

import (
	"testing"
	"time"
)

// BenchmarkReassignStep is the decision cost of in-step reassignment: one
// step of SimulateReassign over 1024 ranks of 32 units, one rank in 16 3×
// slow; ns/op over the events (units + messages) is the cost of one
// Reassigner call. Run with
//
//	go test ./straggler -run '^$' -bench ReassignStep -benchtime 20x
func BenchmarkReassignStep(b *testing.B) {
	const n = 1024
	shares := make([]int, n)
	begin := make([]time.Duration, n)
	for r := range shares {
		shares[r] = 64
	}
	st := ReassignStep{Config: DefaultReassignConfig(2), Shares: shares, Expect: 128 * time.Millisecond, Begin: begin,
		UnitTime: func(r int, u Unit, _ time.Duration) time.Duration {
			if r%16 == 3 {
				return time.Duration(u.Hi-u.Lo) * 6 * time.Millisecond
			}
			return time.Duration(u.Hi-u.Lo) * 2 * time.Millisecond
		}, Latency: 20 * time.Microsecond}
	events := 0
	for b.Loop() {
		out, err := SimulateReassign(st)
		if err != nil {
			b.Fatal(err)
		}
		events = out.Messages + n*32
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
}

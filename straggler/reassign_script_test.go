package straggler

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestReassignScripts runs the in-step reassignment scenarios of
// testdata/reassign/*.txt: one step of SimulateReassign per command, its
// decisions and outcome printed in a stable text form. Regenerate with
//
//	go test ./straggler -run TestReassignScripts -rewrite
//
// Command:
//
//	run ranks=N share=S [unit=U] per-ms=t0,t1,... [begin-ms=b0,...]
//	    [stall=R@K:MS] [helpers=G] [latency-us=L] [trace]
//	    each rank owns S samples in units of U (default 1) and takes t_r
//	    ms per unit, beginning at b_r; stall makes rank R's K-th own unit
//	    take MS ms; trace prints every offer, claim, grant, refusal and
//	    done. The output gives the step's end beside BSP's (each rank its
//	    own share) and the capacity bound (the batch balanced over the
//	    ranks' per-unit speeds, stalls and late beginnings not counted), the units each rank computed, and checks that
//	    every unit was computed exactly once.
func TestReassignScripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "reassign"), func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return runReassignScript(t, d)
		})
	})
}

func scriptFloats(t *testing.T, d *datadriven.TestData, key string, n int, def float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = def
	}
	if !d.HasArg(key) {
		return out
	}
	var s string
	d.ScanArgs(t, key, &s)
	parts := strings.Split(s, ",")
	if len(parts) != n {
		d.Fatalf(t, "%s: %d values for %d ranks", key, len(parts), n)
	}
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		out[i] = v
	}
	return out
}

func runReassignScript(t *testing.T, d *datadriven.TestData) string {
	var n, share int
	d.ScanArgs(t, "ranks", &n)
	d.ScanArgs(t, "share", &share)
	cfg := DefaultReassignConfig(1)
	if d.HasArg("unit") {
		d.ScanArgs(t, "unit", &cfg.UnitSize)
	}
	if d.HasArg("helpers") {
		d.ScanArgs(t, "helpers", &cfg.Helpers)
	}
	lat := 20 * time.Microsecond
	if d.HasArg("latency-us") {
		var us int
		d.ScanArgs(t, "latency-us", &us)
		lat = time.Duration(us) * time.Microsecond
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	per := scriptFloats(t, d, "per-ms", n, 1)
	beginMS := scriptFloats(t, d, "begin-ms", n, 0)
	shares := make([]int, n)
	begin := make([]time.Duration, n)
	for r := range shares {
		shares[r], begin[r] = share, ms(beginMS[r])
	}
	units, spans := ReassignUnits(shares, cfg.UnitSize)
	stallRank, stallUnit, stallMS := -1, -1, 0.0
	if d.HasArg("stall") {
		var s string
		d.ScanArgs(t, "stall", &s)
		if _, err := fmt.Sscanf(s, "%d@%d:%g", &stallRank, &stallUnit, &stallMS); err != nil {
			d.Fatalf(t, "stall=%s: %v", s, err)
		}
	}
	unitTime := func(r int, u Unit, _ time.Duration) time.Duration {
		if r == stallRank && u.Owner == r && unitIndex(units, u)-spans[r].Lo == stallUnit {
			return ms(stallMS)
		}
		return ms(per[r] * float64(u.Hi-u.Lo))
	}
	var b strings.Builder
	st := ReassignStep{Config: cfg, Step: 0, Shares: shares, Expect: ms(float64(share)), Begin: begin, UnitTime: unitTime, Latency: lat}
	if d.HasArg("trace") {
		st.Trace = func(at time.Duration, line string) {
			if !strings.Contains(line, "starts") {
				fmt.Fprintf(&b, "%v %s\n", at, line)
			}
		}
	}
	out, err := SimulateReassign(st)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	bsp, rate, batch := time.Duration(0), 0.0, 0
	for r := range n {
		end := begin[r]
		for u := spans[r].Lo; u < spans[r].Hi; u++ {
			end += unitTime(r, units[u], end)
		}
		bsp = max(bsp, end)
		rate += 1 / per[r]
		batch += share
	}
	capacity := ms(float64(batch) / rate)
	fmt.Fprintf(&b, "step ends %v (BSP %v, capacity %v): %.2f× BSP, %.2f× capacity; %d units moved, %d messages\n",
		out.End, bsp, capacity, float64(out.End)/float64(bsp), float64(out.End)/float64(capacity), out.Moved, out.Messages)
	seen := make([]int, len(units))
	for r, us := range out.Computed {
		helped := 0
		for _, u := range us {
			seen[u]++
			if units[u].Owner != r {
				helped++
			}
		}
		fmt.Fprintf(&b, "rank %d: %d units (%d helped), done %v\n", r, len(us), helped, out.Done[r])
	}
	for u, c := range seen {
		if c != 1 {
			fmt.Fprintf(&b, "unit %d computed %d times\n", u, c)
			return b.String()
		}
	}
	b.WriteString("every unit computed exactly once\n")
	return b.String()
}

func unitIndex(units []Unit, u Unit) int {
	for i, x := range units {
		if x == u {
			return i
		}
	}
	return -1
}

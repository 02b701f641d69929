package sim

import (
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
)

// Compare prices coding beside BSP and the policy: with nobody late it
// picks the ring, with one rank steadily 3× slow shares.
func TestCompareRowsPriceCoding(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{"none", straggler.CodedRing},
		{"slow-3x", straggler.CodedShares},
	} {
		cfg := CompareConfig{Ranks: []int{4}, Patterns: []string{tc.pattern}, Warmup: 2, Steps: 20, BatchPerRank: 16,
			PerSample: time.Millisecond, GradBytes: 1 << 20}
		var rows []Row
		if err := Compare(cfg, func(r Row) error { rows = append(rows, r); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].CodedPick != tc.want || rows[0].CodedS != 1 || !(rows[0].Coded > rows[0].Ideal) {
			t.Errorf("%s: rows %+v, want the pick %s and a coded price (s = 1) above Ideal", tc.pattern, rows, tc.want)
		}
	}
}

// Under FlexRR's power law with α = 2.5, per rank and step (no predictor
// can place it), the latest of 4 ranks is so late that coding with s = 1
// pays for its doubled compute; at α = 4 it does not.
func TestCodedPicksCodingUnderAHeavyPowerLaw(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		coded bool
	}{{"seed=7;powerlaw=2.5", true}, {"seed=7;powerlaw=4", false}} {
		c, _, err := Coded(injector(t, tc.spec, 4), 4, 0, 400, 64, time.Millisecond, 1<<20, DefaultNetwork(), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (c.Mode == straggler.CodedCoded) != tc.coded {
			t.Errorf("%s: picked %s (%+v)", tc.spec, c.Mode, c.Costs)
		}
	}
}

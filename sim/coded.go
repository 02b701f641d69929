package sim

import (
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// Coded prices gradient coding against the ring and shares for steps
// [from, to) of a pattern (straggler.ChooseCoded): each rank's slowdown in
// each step is the injected compute of an equal share over its unslowed
// time, the payloads as large as the gradient (float32) and the sums twice
// that (float64), s up to maxS. clock, when set, times the decision.
func Coded(in *inject.Injector, ranks, from, to, globalBatch int, perSample time.Duration, gradBytes int, net Network,
	maxS int, clock func() time.Time) (straggler.CodedChoice, time.Duration, error) {
	base := perSample * time.Duration(globalBatch) / time.Duration(ranks)
	factors := make([][]float64, 0, to-from)
	for s := from; s < to; s++ {
		row := make([]float64, ranks)
		for r := range row {
			row[r] = float64(in.At(r, s, base).Compute) / float64(base)
		}
		factors = append(factors, row)
	}
	input := straggler.CodedInput{Factors: factors, Compute: base, GradBytes: gradBytes,
		Net: cost.Net{Alpha: net.Alpha, BytesPerSec: net.BytesPerSec}, MaxS: maxS}
	var began time.Time
	if clock != nil {
		began = clock()
	}
	c, err := straggler.ChooseCoded(input)
	var took time.Duration
	if clock != nil {
		took = clock().Sub(began)
	}
	return c, took, err
}

//go:build cgo

package main

import (
	"errors"
	"math"
	"testing"
	"unsafe"
)

// partitionGrad is partition p's gradient at step t: small integers, so
// the sum over partitions is known exactly.
func partitionGrad(p, t, e int) float32 { return float32((p+1)*(e%5+1) + t) }

// TestCodedStepsSumEveryPartitionWithoutAStoppedRank runs 4 ranks over
// the C ABI's Go side, s = 1, unequal throughputs; rank 3 never steps (it
// stopped): the other three get, every step, the sum of all k partitions'
// gradients, bit-identical among them.
func TestCodedStepsSumEveryPartitionWithoutAStoppedRank(t *testing.T) {
	const world, length, steps = 4, 37, 3
	ss := openWorld(t, world)
	runs := make([]*codedRun, world)
	each(t, ss, func(r int, s *session) error {
		var err error
		runs[r], err = openCoded(s, length, 1, "", []float64{1, 1, 2, 2}, 5, 20_000)
		return err
	})
	k := runs[0].k
	held := 0
	for _, r := range runs {
		held += len(r.parts)
	}
	if held != 2*k {
		t.Fatalf("the ranks hold %d partitions of %d: want every one on s+1 = 2 ranks", held, k)
	}
	sums := make([][]float32, world)
	for st := range steps {
		each(t, ss[:3], func(r int, _ *session) error {
			run := runs[r]
			grads := make([]float32, len(run.parts)*length)
			for i, p := range run.parts {
				for e := range length {
					grads[i*length+e] = partitionGrad(p, st, e)
				}
			}
			sums[r] = make([]float32, length)
			var gp unsafe.Pointer
			if len(grads) > 0 {
				gp = unsafe.Pointer(&grads[0])
			}
			return run.step(gp, unsafe.Pointer(&sums[r][0]))
		})
		for e := range length {
			want := 0.0
			for p := range k {
				want += float64(partitionGrad(p, st, e))
			}
			if math.Abs(float64(sums[0][e])-want) > 1e-4*want {
				t.Fatalf("step %d element %d: sum %v, want %v", st, e, sums[0][e], want)
			}
			for r := 1; r < 3; r++ {
				if math.Float32bits(sums[r][e]) != math.Float32bits(sums[0][e]) {
					t.Fatalf("step %d element %d: rank %d got %v, rank 0 %v", st, e, r, sums[r][e], sums[0][e])
				}
			}
		}
	}
	for _, r := range runs {
		r.c.Close()
	}
}

func TestCodedBadArguments(t *testing.T) {
	ss := openWorld(t, 1)
	for name, open := range map[string]func() (*codedRun, error){
		"length 0":    func() (*codedRun, error) { return openCoded(ss[0], 0, 0, "", nil, 1, 0) },
		"s of all":    func() (*codedRun, error) { return openCoded(ss[0], 8, 1, "", nil, 1, 0) },
		"scheme":      func() (*codedRun, error) { return openCoded(ss[0], 8, 0, "fountain", nil, 1, 0) },
		"throughput":  func() (*codedRun, error) { return openCoded(ss[0], 8, 0, "", []float64{0}, 1, 0) },
		"timeout < 0": func() (*codedRun, error) { return openCoded(ss[0], 8, 0, "", nil, 1, -1) },
	} {
		var ae *argError
		if _, err := open(); !errors.As(err, &ae) {
			t.Errorf("%s: err = %v, want an argument error", name, err)
		}
	}
	run, err := openCoded(ss[0], 8, 0, "cyclic", nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ae *argError
	if err := run.step(nil, nil); !errors.As(err, &ae) {
		t.Errorf("step with NULL buffers: %v", err)
	}
}

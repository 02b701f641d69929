package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
)

func TestParseFloat32Sizes(t *testing.T) {
	got, err := ParseFloat32Sizes("4, 7,1K,16M,1G")
	if err != nil || !slices.Equal(got, []int64{4, 4, 1024, 16 << 20, 1 << 30}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "2", "1025M", "x", "4,-8"} {
		if _, err := ParseFloat32Sizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every collective's sweep, alltoall included, checks out on 3 ranks: each
// size's #wrong is 0, busbw follows nccl-tests' factor.
func TestSweepOfEveryCollectiveIsCorrect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comms := commtest.Start(t, 3, nil)
	for _, coll := range Collectives {
		spec := Spec{Collective: coll, MinBytes: 12, MaxBytes: 12 << 10, Factor: 8, DType: ringtail.Float32, Op: ringtail.Sum, Iters: 2, Warmup: 1, Check: true}
		results := make([][]Result, len(comms))
		errs := make([]error, len(comms))
		var wg sync.WaitGroup
		for i, c := range comms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = Run(ctx, c, spec)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s: %v", coll, err)
		}
		if len(results[0]) != 4 {
			t.Fatalf("%s: %d sizes, want 4", coll, len(results[0]))
		}
		for _, r := range results[0] {
			if r.Wrong != 0 || r.Collective != coll || r.Count == 0 {
				t.Errorf("%s: %+v", coll, r)
			}
			if want := r.AlgBW * busFactor(coll, 3); r.BusBW != want {
				t.Errorf("%s: busbw %v, want %v", coll, r.BusBW, want)
			}
		}
	}
}

func TestSpecRefusesSizesOutOfOrder(t *testing.T) {
	s := Spec{Collective: AllReduce, MinBytes: 1 << 30, MaxBytes: 64 << 20, Factor: 2, DType: ringtail.Float32, Op: ringtail.Sum, Iters: 1}
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "(-b 1G) is larger than the largest (-e 64M): raise -e too, e.g. -b 1G -e 1G") {
		t.Fatalf("got %v", err)
	}
}

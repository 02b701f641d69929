package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/bench"
)

type options struct {
	np      int
	sizes   []int64
	iters   int
	warmup  int
	late    int
	delay   time.Duration
	jsonOut bool
	noShm   bool
}

// result is one size's medians (milliseconds).
type result struct {
	Ranks      int     `json:"ranks"`
	Late       int     `json:"late_rank"`
	SizeBytes  int64   `json:"size_bytes"`
	Iters      int     `json:"iters"`
	RingMS     float64 `json:"ring_ms"`
	DelayMS    float64 `json:"delay_ms"`
	PlainMS    float64 `json:"plain_ms"`
	LateMS     float64 `json:"late_ms"`
	Speedup    float64 `json:"speedup"`
	PlainAftMS float64 `json:"plain_after_arrival_ms"`
	LateAftMS  float64 `json:"late_after_arrival_ms"`
	SpeedupAft float64 `json:"speedup_after_arrival"`
	PairRatio  float64 `json:"speedup_median_of_pairs"`
	Wrong      int     `json:"wrong"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("late", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var sizes string
	fs.IntVar(&o.np, "np", 4, "ranks in this process (ignored when started by a launcher)")
	fs.StringVar(&sizes, "size", "16M,64M", "comma-separated buffer sizes (float32)")
	fs.IntVar(&o.iters, "iters", 9, "trials per variant and size")
	fs.IntVar(&o.warmup, "warmup", 2, "untimed calls of each variant per size")
	fs.IntVar(&o.late, "late", -1, "the late rank (-1: the last)")
	fs.DurationVar(&o.delay, "delay", 0, "how late the late rank is (0: one ring time, measured)")
	fs.BoolVar(&o.jsonOut, "json", false, "one JSON object per size")
	fs.BoolVar(&o.noShm, "no-shm", false, "in-process ranks over unix sockets instead of shared memory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if o.sizes, err = bench.ParseFloat32Sizes(sizes); err != nil {
		fmt.Fprintf(stderr, "late: %v\n", err)
		return 2
	}
	if o.iters < 1 || o.warmup < 0 || o.delay < 0 {
		fmt.Fprintln(stderr, "late: -iters must be positive, -warmup and -delay not negative")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	comms, err := bench.Comms(ctx, o.np, func(c *ringtail.Config) {
		c.Insecure, c.DisableShm = true, o.noShm
	})
	if err != nil {
		fmt.Fprintf(stderr, "late: %v\n", err)
		if errors.Is(err, bench.ErrUsage) {
			return 2
		}
		return 1
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	n := comms[0].Size()
	if o.late < 0 {
		o.late = n - 1
	}
	if o.late >= n {
		fmt.Fprintf(stderr, "late: -late %d outside 0..%d\n", o.late, n-1)
		return 2
	}
	if !o.jsonOut && comms[0].Rank() == 0 {
		fmt.Fprintf(stdout, "# late: %d ranks, late rank %d, float32 sum, %d trials per variant (interleaved), medians in ms\n", n, o.late, o.iters)
		fmt.Fprintf(stdout, "# %10s %8s %8s %8s %8s %7s %10s %10s %7s %6s\n", "bytes", "ring", "delay", "plain", "late", "speedup", "plain-aft", "late-aft", "speedup", "#wrong")
	}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() { errs[i] = rank(ctx, c, &o, stdout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "late:", err)
		return 1
	}
	return 0
}

// rank runs every size on one rank; rank 0 prints.
func rank(ctx context.Context, c *ringtail.Comm, o *options, out io.Writer) error {
	n, me := c.Size(), c.Rank()
	for _, size := range o.sizes {
		count := int(size / 4)
		buf := make([]float32, count)
		want := float32(n * (n + 1) / 2)
		stats := make([]float64, 3)
		// trial runs one call and returns, over every rank, the time to the
		// last return, the late rank's actual delay and the wrong flag.
		trial := func(exact bool, delay time.Duration) (total, arrive float64, wrong bool, err error) {
			for i := range buf {
				buf[i] = float32(me + 1)
			}
			if err := c.Barrier(ctx); err != nil {
				return 0, 0, false, err
			}
			t0 := time.Now()
			var slept time.Duration
			if me == o.late && delay > 0 {
				if err := ringtail.Sleep(ctx, delay); err != nil {
					return 0, 0, false, err
				}
				slept = time.Since(t0)
			}
			if exact {
				err = c.AllReduceLate(ctx, ringtail.Float32s(buf), ringtail.Sum, o.late)
			} else {
				err = c.AllReduce(ctx, ringtail.Float32s(buf), ringtail.Sum)
			}
			if err != nil {
				return 0, 0, false, err
			}
			stats[0], stats[1], stats[2] = time.Since(t0).Seconds(), slept.Seconds(), 0
			if count > 0 && (buf[0] != want || buf[count-1] != want || buf[count/2] != want) {
				stats[2] = 1
			}
			if err := c.AllReduce(ctx, ringtail.Float64s(stats), ringtail.Max); err != nil {
				return 0, 0, false, err
			}
			return stats[0], stats[1], stats[2] != 0, nil
		}
		res := result{Ranks: n, Late: o.late, SizeBytes: size, Iters: o.iters}
		for range o.warmup {
			for _, exact := range []bool{false, true} {
				if _, _, _, err := trial(exact, 0); err != nil {
					return err
				}
			}
		}
		var ring []float64
		for range o.iters {
			t, _, wrong, err := trial(false, 0)
			if err != nil {
				return fmt.Errorf("%d bytes, ring time: %w", size, err)
			}
			ring = append(ring, t)
			res.Wrong += b2i(wrong)
		}
		res.RingMS = median(ring) * 1e3
		delay := o.delay
		if delay == 0 {
			delay = time.Duration(median(ring) * float64(time.Second))
		}
		res.DelayMS = delay.Seconds() * 1e3
		var plain, exact, plainAft, exactAft, ratios []float64
		for i := range o.iters {
			var pt, et float64
			for j := range 2 {
				isExact := (i+j)%2 == 1 // plain first in even trials
				t, arrive, wrong, err := trial(isExact, delay)
				if err != nil {
					return fmt.Errorf("%d bytes, trial %d, %s: %w", size, i, variant(isExact), err)
				}
				res.Wrong += b2i(wrong)
				if isExact {
					exact, exactAft, et = append(exact, t), append(exactAft, t-arrive), t
				} else {
					plain, plainAft, pt = append(plain, t), append(plainAft, t-arrive), t
				}
			}
			ratios = append(ratios, pt/et)
		}
		res.PlainMS, res.LateMS = median(plain)*1e3, median(exact)*1e3
		res.PlainAftMS, res.LateAftMS = median(plainAft)*1e3, median(exactAft)*1e3
		res.Speedup, res.SpeedupAft = res.PlainMS/res.LateMS, res.PlainAftMS/res.LateAftMS
		res.PairRatio = median(ratios)
		if me != 0 {
			continue
		}
		if o.jsonOut {
			b, _ := json.Marshal(res)
			fmt.Fprintln(out, string(b))
			continue
		}
		fmt.Fprintf(out, "  %10d %8.1f %8.1f %8.1f %8.1f %7.2f %10.1f %10.1f %7.2f %6d\n", size, res.RingMS, res.DelayMS,
			res.PlainMS, res.LateMS, res.Speedup, res.PlainAftMS, res.LateAftMS, res.SpeedupAft, res.Wrong)
	}
	return nil
}

func variant(exact bool) string {
	if exact {
		return "AllReduceLate"
	}
	return "AllReduce"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

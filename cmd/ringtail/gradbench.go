package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/gradcode/coded"
	"github.com/ringtail-ml/ringtail/internal/cli"
)

// gradBenchRow is one (case, scheme) result of `ringtail bench gradcode`.
type gradBenchRow struct {
	Case   string  `json:"case"`
	Scheme string  `json:"scheme"`
	IterS  float64 `json:"iter_s"`
	BoundS float64 `json:"bound_s"`
	Err    string  `json:"error,omitempty"`
}

// gradBenchOpts are the parsed flags.
type gradBenchOpts struct {
	speeds  []float64 // relative compute speeds of the in-process ranks
	iters   int
	work    time.Duration
	length  int
	s       int
	seed    int64
	slow    float64
	deadSet []int
}

const benchGradcodeUsage = `Usage: ringtail bench gradcode [--speeds 1,1,2,2,4,4] [--iters 10] [--json]

Times naive BSP and the coded allreduce schemes on in-process ranks (one
per --speeds entry) over real sockets, compute emulated as a sleep in
proportion to partitions / throughput: case a (the speeds), b (a plus
transient stragglers) and c (a plus dead ranks), each against the
Theorem-5 bound. See docs/gradcode.md.
`

// runBenchGradcode times naive BSP and the coded schemes on 6 in-process
// ranks over real sockets, with compute emulated as sleep ∝ partitions /
// throughput: case a (speeds 1,1,2,2,4,4), b (a plus s transient stragglers
// per iteration) and c (a plus s dead ranks, 0 and 4: the first leader dies).
func runBenchGradcode(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail bench gradcode", benchGradcodeUsage)
	fs := cmd.Flags
	var o gradBenchOpts
	fs.IntVar(&o.iters, "iters", 10, "timed iterations per (case, scheme)")
	fs.DurationVar(&o.work, "work", time.Second, "compute time of the whole data set on a speed-1 rank")
	fs.IntVar(&o.length, "len", 1<<16, "gradient elements")
	fs.Int64Var(&o.seed, "seed", 1, "seed for plans and transient stragglers")
	fs.Float64Var(&o.slow, "slowdown", 4, "slowdown factor of a transient straggler (case b)")
	asJSON := fs.Bool("json", false, "print one JSON object per (case, scheme)")
	speeds := fs.String("speeds", "1,1,2,2,4,4", "relative compute speeds, one per rank (at least 3)")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	if o.iters < 1 || o.work <= 0 || o.length < 1 || o.slow < 1 {
		return cmd.Fail(stderr, "--iters, --work, --len must be positive and --slowdown ≥ 1")
	}
	for _, f := range strings.Split(*speeds, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(stderr, "ringtail bench gradcode: bad speed %q in --speeds\n", f)
			return 2
		}
		o.speeds = append(o.speeds, v)
	}
	if len(o.speeds) < 5 {
		fmt.Fprintln(stderr, "ringtail bench gradcode: --speeds needs at least 5 ranks (s = 2 stragglers plus a decodable set)")
		return 2
	}
	o.s, o.deadSet = 2, []int{0, len(o.speeds) - 2}
	n := len(o.speeds)
	thr := make([]float64, n)
	for i, v := range o.speeds {
		thr[i] = v * float64(n) / o.work.Seconds() // partitions of 1/n of the data per second
	}
	bound, err := gradcode.OptimalComputeTime(thr, o.s, n)
	if err != nil {
		fmt.Fprintln(stderr, "bench gradcode:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	if !*asJSON {
		fmt.Fprintf(stdout, "%-4s %-7s %10s %10s  %s\n", "case", "scheme", "iter_s", "bound_s", "note")
	}
	for _, cs := range []string{"a", "b", "c"} {
		for _, scheme := range []string{"bsp", "cyclic", "hetero", "group"} {
			row := gradBenchRow{Case: cs, Scheme: scheme, BoundS: bound}
			it, err := gradBenchRun(o, cs, scheme)
			row.IterS = it
			if err != nil {
				row.Err = err.Error()
			}
			if *asJSON {
				_ = enc.Encode(row)
			} else {
				fmt.Fprintf(stdout, "%-4s %-7s %10.4f %10.4f  %s\n", cs, scheme, row.IterS, row.BoundS, row.Err)
			}
		}
	}
	return 0
}

// gradBenchRun runs one (case, scheme) and returns seconds per iteration.
func gradBenchRun(o gradBenchOpts, cs, scheme string) (float64, error) {
	n := len(o.speeds)
	var dead []int
	if cs == "c" {
		if scheme == "bsp" {
			return 0, errors.New("BSP waits for every rank: no iteration completes with dead ranks")
		}
		dead = o.deadSet
	}
	comms, err := ringtail.NewLocal(context.Background(), n, func(c *ringtail.Config) {
		c.Insecure, c.JobID, c.TolerateDeaths = true, "bench-gradcode", true
		c.PeerTimeout, c.OpTimeout, c.ConnectTimeout = time.Second, time.Minute, 30*time.Second
	})
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	for _, d := range dead {
		comms[d].Close()
	}
	// slowdown is the compute multiplier of rank r at iteration it.
	slowdown := func(r, it int) float64 {
		if cs != "b" {
			return 1
		}
		if slices.Contains(rand.New(rand.NewSource(o.seed + int64(it))).Perm(n)[:o.s], r) {
			return o.slow
		}
		return 1
	}
	compute := func(r int) coded.ComputeFunc {
		return func(ctx context.Context, it, k int, parts []int, grads [][]float64) error {
			d := time.Duration(float64(o.work) * float64(len(parts)) / float64(k) / o.speeds[r] * slowdown(r, it))
			if err := ringtail.Sleep(ctx, d); err != nil {
				return err
			}
			for t, j := range parts {
				g := grads[t]
				for e := range g {
					g[e] = float64(j + 1)
				}
			}
			return nil
		}
	}
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		if slices.Contains(dead, r) {
			continue
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.iters+1)*(o.work*time.Duration(o.slow)+30*time.Second))
			defer cancel()
			if scheme == "bsp" {
				took[r], errs[r] = gradBenchBSP(ctx, comms[r], o, compute(r))
				return
			}
			took[r], errs[r] = gradBenchCoded(ctx, comms[r], o, gradcode.Scheme(scheme), compute(r))
		}(r)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return slices.Max(took).Seconds() / float64(o.iters), nil
}

// gradBenchCoded runs one warm-up and o.iters timed coded steps.
func gradBenchCoded(ctx context.Context, c *ringtail.Comm, o gradBenchOpts, scheme gradcode.Scheme, compute coded.ComputeFunc) (time.Duration, error) {
	cd, err := coded.New(c, coded.Config{Scheme: scheme, S: o.s, Len: o.length, Seed: o.seed, Throughputs: coded.Static(o.speeds), StepTimeout: 60 * time.Second})
	if err != nil {
		return 0, err
	}
	defer cd.Close()
	out := make([]float64, o.length)
	var start time.Time
	for it := 0; it <= o.iters; it++ {
		if it == 1 {
			start = time.Now()
		}
		if _, err := cd.Step(ctx, compute, out); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// gradBenchBSP runs one warm-up and o.iters uncoded steps: one partition per
// rank, then an allreduce that waits for every rank.
func gradBenchBSP(ctx context.Context, c *ringtail.Comm, o gradBenchOpts, compute coded.ComputeFunc) (time.Duration, error) {
	n := c.Size()
	grads := [][]float64{make([]float64, o.length)}
	buf := make([]float32, o.length)
	var start time.Time
	for it := 0; it <= o.iters; it++ {
		if it == 1 {
			start = time.Now()
		}
		if err := compute(ctx, it, n, []int{c.Rank()}, grads); err != nil {
			return 0, err
		}
		for e, x := range grads[0] {
			buf[e] = float32(x)
		}
		if err := c.AllReduce(ctx, ringtail.Float32s(buf), ringtail.Sum); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

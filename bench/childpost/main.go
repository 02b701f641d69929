package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/bench"
	"github.com/ringtail-ml/ringtail/straggler"
)

type options struct {
	np      int
	sizes   []int64
	zeros   float64
	iters   int
	warmup  int
	jsonOut bool
}

// result is one size and kind's medians (milliseconds).
type result struct {
	SizeBytes   int64   `json:"size_bytes"`
	Kind        string  `json:"kind"`
	LinkMBps    float64 `json:"link_MBps"`
	Iters       int     `json:"iters"`
	PlainMS     float64 `json:"plain_ms"`
	CompressMS  float64 `json:"compressed_ms"`
	Speedup     float64 `json:"speedup"`
	PairRatio   float64 `json:"speedup_median_of_pairs"`
	Ratio       float64 `json:"wire_ratio"`
	EncodeMS    float64 `json:"encode_ms"`
	Decision    string  `json:"decision"`
	SavedMS     float64 `json:"predicted_saved_ms"`
	CostMS      float64 `json:"predicted_cost_ms"`
	Wrong       int     `json:"wrong"`
	CompFrames  int     `json:"compressed_frames"`
	TotalFrames int     `json:"frames"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("childpost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var sizes string
	fs.IntVar(&o.np, "np", 2, "ranks in this process (ignored when started by a launcher)")
	fs.StringVar(&sizes, "size", "4M,16M", "comma-separated gradient sizes in bytes (float32)")
	fs.Float64Var(&o.zeros, "zeros", 0.9, "fraction of the sparse gradient's elements that are zero")
	fs.IntVar(&o.iters, "iters", 7, "trials per variant, size and kind")
	fs.IntVar(&o.warmup, "warmup", 1, "untimed trials of each variant per size and kind")
	fs.BoolVar(&o.jsonOut, "json", false, "one JSON object per size and kind")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if o.sizes, err = bench.ParseFloat32Sizes(sizes); err != nil {
		fmt.Fprintf(stderr, "childpost: %v\n", err)
		return 2
	}
	if o.iters < 1 || o.warmup < 0 || !(o.zeros >= 0 && o.zeros < 1) {
		fmt.Fprintln(stderr, "childpost: -iters must be positive, -warmup not negative, -zeros in [0,1)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	comms, err := bench.Comms(ctx, o.np, func(c *ringtail.Config) { c.Insecure = true })
	if err != nil {
		fmt.Fprintf(stderr, "childpost: %v\n", err)
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
	if comms[0].Size() < 2 {
		fmt.Fprintln(stderr, "childpost: needs at least 2 ranks")
		return 2
	}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() { errs[i] = rank(ctx, c, &o, stdout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "childpost:", err)
		return 1
	}
	return 0
}

// gradient fills b (float32s as bytes) deterministically from seed: zeros
// of the elements zero at scattered positions, the rest random normal.
func gradient(b []byte, zeros float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	for i := 0; i+4 <= len(b); i += 4 {
		v := float32(0)
		if rng.Float64() >= zeros {
			v = float32(rng.NormFloat64())
		}
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

// rank runs every size and kind on one rank; rank 0 prints.
func rank(ctx context.Context, c *ringtail.Comm, o *options, out io.Writer) error {
	n, me := c.Size(), c.Rank()
	child, parent := n-1, 0
	est, err := c.Probe(ctx, ringtail.ProbeConfig{Large: 4 << 20})
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	bw := est.Bandwidth[child][parent]
	if me == 0 && !o.jsonOut {
		fmt.Fprintf(out, "# childpost: rank %d posts to rank %d over a link probed at %.1f MB/s (%.0f Mbit/s); %d trials per variant (interleaved), medians in ms\n",
			child, parent, bw/1e6, bw*8/1e6, o.iters)
		fmt.Fprintf(out, "# %10s %6s %9s %9s %7s %7s %7s %9s %8s %9s %9s %6s\n", "bytes", "kind", "plain", "s2", "speedup", "pairs", "ratio", "encode", "decision", "pred-save", "pred-cost", "#wrong")
	}
	ack := make([]float32, 2)
	stats := make([]float64, 8)
	for _, size := range o.sizes {
		for _, kind := range []string{"sparse", "dense"} {
			zeros := o.zeros
			if kind == "dense" {
				zeros = 0
			}
			grad := make([]byte, size)
			gradient(grad, zeros, uint64(size))
			dec, err := straggler.NewCompression(straggler.CompressionConfig{})
			if err != nil {
				return err
			}
			var compFrames, frames int
			// trial runs one post; it returns the child's time and whether
			// the parent got anything but the gradient.
			tagN := uint32(0)
			trial := func(compress bool) (float64, bool, error) {
				tagN++
				if err := c.Barrier(ctx); err != nil {
					return 0, false, err
				}
				wrong := false
				var t float64
				switch me {
				case child:
					t0 := time.Now()
					p, err := c.ContributeAsyncWith(ctx, parent, ringtail.Buffer{Bytes: grad, DType: ringtail.Float32}, tagN, ringtail.PostOptions{Compress: compress})
					if err != nil {
						return 0, false, err
					}
					a, err := c.TakeContribution(ctx, parent, tagN)
					if err != nil {
						return 0, false, err
					}
					t = time.Since(t0).Seconds()
					a.Release()
					if err := p.Wait(ctx); err != nil {
						return 0, false, err
					}
					if st, ok := p.Stats(); ok {
						if err := dec.Observe(st.Bytes, st.WireBytes, st.Encode); err != nil {
							return 0, false, err
						}
						compFrames, frames = st.Compressed, st.Frames
					}
				case parent:
					g, err := c.TakeContribution(ctx, child, tagN)
					if err != nil {
						return 0, false, err
					}
					wrong = string(g.Data.Bytes) != string(grad)
					g.Release()
					if err := c.Contribute(ctx, child, ringtail.Float32s(ack), tagN); err != nil {
						return 0, false, err
					}
				}
				return t, wrong, nil
			}
			res := result{SizeBytes: size, Kind: kind, LinkMBps: bw / 1e6, Iters: o.iters}
			for range o.warmup {
				for _, comp := range []bool{false, true} {
					if _, _, err := trial(comp); err != nil {
						return err
					}
				}
			}
			var plain, comp, ratios []float64
			for i := range o.iters {
				var pt, ct float64
				for j := range 2 {
					compress := (i+j)%2 == 1
					t, wrong, err := trial(compress)
					if err != nil {
						return fmt.Errorf("%d bytes %s, trial %d (compress %v): %w", size, kind, i, compress, err)
					}
					res.Wrong += b2i(wrong)
					if compress {
						comp, ct = append(comp, t), t
					} else {
						plain, pt = append(plain, t), t
					}
				}
				ratios = append(ratios, pt/ct)
			}
			d := dec.Decide(size, bw)
			// The child's numbers go to rank 0 (Max over ranks: the
			// others contribute zeros).
			clear(stats)
			if me == child {
				stats[0], stats[1], stats[2] = median(plain), median(comp), median(ratios)
				stats[3], stats[4] = dec.Ratio(), float64(size)/dec.EncodeRate()
				stats[5], stats[6], stats[7] = b2f(d.Pays), d.Saved.Seconds(), d.Cost.Seconds()
			}
			wrongs := []float64{float64(res.Wrong), float64(compFrames), float64(frames)}
			if err := c.AllReduce(ctx, ringtail.Float64s(stats), ringtail.Max); err != nil {
				return err
			}
			if err := c.AllReduce(ctx, ringtail.Float64s(wrongs), ringtail.Max); err != nil {
				return err
			}
			if me != 0 {
				continue
			}
			res.PlainMS, res.CompressMS, res.PairRatio = stats[0]*1e3, stats[1]*1e3, stats[2]
			res.Speedup = res.PlainMS / res.CompressMS
			res.Ratio, res.EncodeMS = stats[3], stats[4]*1e3
			res.SavedMS, res.CostMS = stats[6]*1e3, stats[7]*1e3
			if stats[5] != 0 {
				res.Decision = "compress"
			} else {
				res.Decision = "decline"
			}
			res.Wrong, res.CompFrames, res.TotalFrames = int(wrongs[0]), int(wrongs[1]), int(wrongs[2])
			if o.jsonOut {
				b, _ := json.Marshal(res)
				fmt.Fprintln(out, string(b))
				continue
			}
			fmt.Fprintf(out, "  %10d %6s %9.1f %9.1f %7.2f %7.2f %7.3f %9.2f %8s %9.1f %9.2f %6d\n", size, kind, res.PlainMS, res.CompressMS,
				res.Speedup, res.PairRatio, res.Ratio, res.EncodeMS, res.Decision, res.SavedMS, res.CostMS, res.Wrong)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func b2f(b bool) float64 { return float64(b2i(b)) }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/reduce"
)

// Collective names accepted by Spec.Collective.
const (
	AllReduce     = "allreduce"
	AllGather     = "allgather"
	Broadcast     = "broadcast"
	ReduceScatter = "reducescatter"
	AllToAll      = "alltoall"
)

// Collectives are the collectives a sweep measures, in the order help
// lists them.
var Collectives = []string{AllReduce, AllGather, Broadcast, ReduceScatter, AllToAll}

// Spec is one sweep.
type Spec struct {
	Collective string
	MinBytes   int64
	MaxBytes   int64
	Factor     int64
	DType      ringtail.DType
	Op         ringtail.Op
	Root       int
	Iters      int
	Warmup     int
	Check      bool
	// Each, if set, is called with each size's result as soon as it is
	// measured (on every rank), before the next size starts.
	Each func(Result) `json:"-"`
}

// Validate checks the sweep.
func (s *Spec) Validate() error {
	switch s.Collective {
	case AllReduce, AllGather, Broadcast, ReduceScatter, AllToAll:
	default:
		return fmt.Errorf("bench: unknown collective %q (want %s)", s.Collective, strings.Join(Collectives, ", "))
	}
	if s.MinBytes < 0 {
		return fmt.Errorf("bench: negative minimum size %d", s.MinBytes)
	}
	if s.MaxBytes < s.MinBytes {
		return fmt.Errorf("bench: the smallest size (-b %s) is larger than the largest (-e %s): raise -e too, e.g. -b %s -e %s",
			FormatSize(s.MinBytes), FormatSize(s.MaxBytes), FormatSize(s.MinBytes), FormatSize(s.MinBytes))
	}
	if s.MaxBytes > 4<<30 {
		return fmt.Errorf("bench: max size %d exceeds 4 GiB", s.MaxBytes)
	}
	if s.Factor < 2 {
		return fmt.Errorf("bench: factor %d must be at least 2", s.Factor)
	}
	if !s.DType.Valid() {
		return fmt.Errorf("bench: invalid dtype")
	}
	if !s.Op.Valid() {
		return fmt.Errorf("bench: invalid op")
	}
	if s.Iters < 1 || s.Warmup < 0 {
		return fmt.Errorf("bench: iters %d, warmup %d", s.Iters, s.Warmup)
	}
	return nil
}

// Result is one size's measurement, as nccl-tests prints it.
type Result struct {
	Collective string  `json:"collective"`
	Ranks      int     `json:"ranks"`
	SizeBytes  int64   `json:"size_bytes"`
	Count      int64   `json:"count"`
	Type       string  `json:"type"`
	RedOp      string  `json:"redop"`
	Root       int     `json:"root"`
	TimeUS     float64 `json:"time_us"`
	AlgBW      float64 `json:"algbw_gbps"`
	BusBW      float64 `json:"busbw_gbps"`
	Wrong      int64   `json:"wrong"`
}

// ParseSize parses nccl-tests sizes: a byte count with an optional K, M or
// G suffix (binary multiples), e.g. 8, 64K, 256M, 1G.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 8, 64K, 256M, 1G)", s)
	}
	return n * mult, nil
}

// ParseFloat32Sizes parses a comma-separated list of sizes (ParseSize)
// of float32 buffers: each from 4 bytes to 1 GiB, rounded down to whole
// elements.
func ParseFloat32Sizes(list string) ([]int64, error) {
	var out []int64
	for _, s := range strings.Split(list, ",") {
		b, err := ParseSize(s)
		if err != nil || b < 4 || b > 1<<30 {
			return nil, fmt.Errorf("bad size %q (4 bytes to 1 GiB of float32)", s)
		}
		out = append(out, b/4*4)
	}
	return out, nil
}

// busFactor converts algbw to busbw for n ranks.
func busFactor(coll string, n int) float64 {
	switch coll {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Run executes the sweep on this rank and returns one Result per size (the
// same on every rank: times are the maximum over ranks, wrong the sum).
func Run(ctx context.Context, comm *ringtail.Comm, s Spec) ([]Result, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	n := comm.Size()
	es := int64(s.DType.Size())
	// nccl-tests sizes: the per-rank data for allreduce and broadcast, the
	// gathered total for allgather, the input total for reduce-scatter.
	maxElems := s.MaxBytes / es
	big := make([]byte, maxElems*es)
	small := make([]byte, maxElems*es)
	var out []Result
	for size := s.MinBytes; size <= s.MaxBytes; size *= s.Factor {
		count := size / es
		if s.Collective == AllGather || s.Collective == ReduceScatter || s.Collective == AllToAll {
			count -= count % int64(n)
		}
		r, err := measure(ctx, comm, s, count, big, small)
		if err != nil {
			return out, fmt.Errorf("bench %s size %d: %w", s.Collective, size, err)
		}
		out = append(out, r)
		if s.Each != nil {
			s.Each(r)
		}
		if size == 0 {
			size = 1
		}
	}
	return out, nil
}

func measure(ctx context.Context, comm *ringtail.Comm, s Spec, count int64, big, small []byte) (Result, error) {
	n, rank := comm.Size(), comm.Rank()
	es := int64(s.DType.Size())
	res := Result{Collective: s.Collective, Ranks: n, SizeBytes: count * es, Count: count, Type: s.DType.String(), RedOp: s.Op.String(), Root: s.Root}
	if s.Collective != AllReduce && s.Collective != ReduceScatter {
		// nccl-tests prints "none" for collectives without a reduction.
		res.RedOp = "none"
	}
	per := count / int64(n)
	var data, input ringtail.Buffer
	call := func() error {
		switch s.Collective {
		case AllReduce:
			return comm.AllReduce(ctx, data, s.Op)
		case Broadcast:
			return comm.Broadcast(ctx, data, s.Root)
		case AllGather:
			return comm.AllGather(ctx, input, data)
		case AllToAll:
			return comm.AllToAll(ctx, input, data)
		default:
			return comm.ReduceScatter(ctx, input, data, s.Op)
		}
	}
	switch s.Collective {
	case AllReduce, Broadcast:
		data = ringtail.Raw(big[:count*es], s.DType)
	case AllGather:
		data, input = ringtail.Raw(big[:count*es], s.DType), ringtail.Raw(small[:per*es], s.DType)
	case ReduceScatter:
		data, input = ringtail.Raw(small[:per*es], s.DType), ringtail.Raw(big[:count*es], s.DType)
	case AllToAll:
		data, input = ringtail.Raw(small[:count*es], s.DType), ringtail.Raw(big[:count*es], s.DType)
	}
	if s.Check {
		fill(s, rank, data, input)
		if err := call(); err != nil {
			return res, err
		}
		res.Wrong = check(s, n, rank, data)
	}
	for i := 0; i < s.Warmup; i++ {
		if err := call(); err != nil {
			return res, err
		}
	}
	if err := comm.Barrier(ctx); err != nil {
		return res, err
	}
	start := time.Now()
	for i := 0; i < s.Iters; i++ {
		if err := call(); err != nil {
			return res, err
		}
	}
	avg := time.Since(start).Seconds() / float64(s.Iters)
	agg := []float64{avg, float64(res.Wrong)}
	tmax := []float64{avg}
	if err := comm.AllReduce(ctx, ringtail.Float64s(tmax), ringtail.Max); err != nil {
		return res, err
	}
	if err := comm.AllReduce(ctx, ringtail.Float64s(agg[1:]), ringtail.Sum); err != nil {
		return res, err
	}
	res.Wrong = int64(agg[1])
	res.TimeUS = tmax[0] * 1e6
	if tmax[0] > 0 {
		res.AlgBW = float64(res.SizeBytes) / tmax[0] / 1e9
	}
	res.BusBW = res.AlgBW * busFactor(s.Collective, n)
	return res, nil
}

// value is the test pattern: small integers, exact in every type and in
// any summation order.
func value(rank int, i int64) float32 { return float32((int64(rank) + i) % 5) }

func set(b ringtail.Buffer, i int64, v float32) {
	switch b.DType {
	case ringtail.Float32:
		reduceView[float32](b)[i] = v
	case ringtail.Float64:
		reduceView[float64](b)[i] = float64(v)
	case ringtail.Int32:
		reduceView[int32](b)[i] = int32(v)
	case ringtail.Int64:
		reduceView[int64](b)[i] = int64(v)
	case ringtail.Uint8:
		b.Bytes[i] = uint8(v)
	case ringtail.Float16:
		reduceView[uint16](b)[i] = reduce.F32ToF16(v)
	case ringtail.BFloat16:
		reduceView[uint16](b)[i] = reduce.F32ToBF16(v)
	}
}

func get(b ringtail.Buffer, i int64) float32 {
	switch b.DType {
	case ringtail.Float32:
		return reduceView[float32](b)[i]
	case ringtail.Float64:
		return float32(reduceView[float64](b)[i])
	case ringtail.Int32:
		return float32(reduceView[int32](b)[i])
	case ringtail.Int64:
		return float32(reduceView[int64](b)[i])
	case ringtail.Uint8:
		return float32(b.Bytes[i])
	case ringtail.Float16:
		return reduce.F16ToF32(reduceView[uint16](b)[i])
	}
	return reduce.BF16ToF32(reduceView[uint16](b)[i])
}

func fill(s Spec, rank int, data, input ringtail.Buffer) {
	target := data
	if s.Collective == AllGather || s.Collective == ReduceScatter || s.Collective == AllToAll {
		target = input
	}
	for i := int64(0); i < int64(target.Len()); i++ {
		set(target, i, value(rank, i))
	}
}

func expected(s Spec, n, rank int, i int64, perRank int64) float32 {
	switch s.Collective {
	case Broadcast:
		return value(s.Root, i)
	case AllGather:
		return value(int(i/perRank), i%perRank)
	case AllToAll:
		// Block b came from rank b: its block for this rank.
		return value(int(i/perRank), int64(rank)*perRank+i%perRank)
	}
	idx := i
	if s.Collective == ReduceScatter {
		idx = int64(rank)*perRank + i
	}
	acc := value(0, idx)
	for r := 1; r < n; r++ {
		v := value(r, idx)
		switch s.Op {
		case ringtail.Sum, ringtail.Avg:
			acc += v
		case ringtail.Prod:
			acc *= v
		case ringtail.Min:
			acc = min(acc, v)
		case ringtail.Max:
			acc = max(acc, v)
		}
	}
	if s.Op == ringtail.Avg {
		acc /= float32(n)
	}
	return acc
}

func check(s Spec, n, rank int, data ringtail.Buffer) int64 {
	var wrong int64
	per := int64(data.Len())
	if s.Collective == AllGather || s.Collective == AllToAll {
		per = int64(data.Len() / n)
	}
	tol := float32(0)
	if s.Op == ringtail.Avg || s.DType == ringtail.Float16 || s.DType == ringtail.BFloat16 {
		tol = 1e-2 * float32(n)
	}
	isInt := s.DType == ringtail.Int32 || s.DType == ringtail.Int64 || s.DType == ringtail.Uint8
	for i := int64(0); i < int64(data.Len()); i++ {
		want := expected(s, n, rank, i, per)
		if isInt && s.Op == ringtail.Avg {
			want = float32(int64(want*float32(n)) / int64(n))
		}
		if d := get(data, i) - want; d > tol || d < -tol {
			wrong++
		}
	}
	return wrong
}

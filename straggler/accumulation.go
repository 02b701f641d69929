package straggler

import (
	"fmt"
	"math"

	"github.com/ringtail-ml/ringtail/balance"
)

// DefaultMaxAccum is Memory.MaxAccum's default: AntDT-DD's Ĉmax, the most
// micro-batches a rank's share is planned in.
const DefaultMaxAccum = 8

// Memory bounds each rank's micro-batch by its device's memory, as
// AntDT-DD does (Eq. 4): a rank's share of the global batch is computed
// as accumulation count × micro-batch, the micro-batch never above the
// rank's cap, and the shares policy gives no rank more than MaxAccum
// micro-batches' worth. Every rank must hold the same Memory (the driver
// gathers the caps), so every rank plans the same split.
type Memory struct {
	// MicroCap is each rank's largest micro-batch, in samples: what its
	// device's memory holds (balance.MaxBatchFromMemory of the free
	// memory, from NVML or a configured cap). ≤ 0: unbounded.
	MicroCap []int `json:"micro_cap"`
	// MaxAccum is Ĉmax (0: DefaultMaxAccum).
	MaxAccum int `json:"max_accum,omitempty"`
}

// maxAccum is MaxAccum with its default filled.
func (m *Memory) maxAccum() int {
	if m.MaxAccum == 0 {
		return DefaultMaxAccum
	}
	return m.MaxAccum
}

// validate checks the caps against the job: one per rank, and room for
// the global batch within MaxAccum passes.
func (m *Memory) validate(world, globalBatch, minShare int) error {
	if m == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("straggler: memory: "+format+": %w", append(args, ErrInvalidConfig)...)
	}
	if len(m.MicroCap) != world {
		return bad("%d micro-batch caps for %d ranks", len(m.MicroCap), world)
	}
	if m.MaxAccum < 0 {
		return bad("max accumulation %d must be ≥ 0 (0: %d)", m.MaxAccum, DefaultMaxAccum)
	}
	room := 0
	for r, c := range m.MicroCap {
		limit := balance.ShareLimit(c, m.maxAccum())
		if limit == 0 {
			return nil // an unbounded rank holds any batch
		}
		if limit < minShare {
			return bad("rank %d holds %d samples in %d passes of %d, below the minimum share %d", r, limit, m.maxAccum(), c, minShare)
		}
		room = min(room+limit, math.MaxInt-1)
	}
	if room < globalBatch {
		return bad("the ranks hold %d samples in %d passes, less than the global batch %d", room, m.maxAccum(), globalBatch)
	}
	return nil
}

// shareLimits returns the largest share of each of members (every rank
// when members is nil) within the memory plan, 0 for unbounded, or nil
// without one.
func (c Config) shareLimits(members []int) []int {
	if c.Memory == nil {
		return nil
	}
	if members == nil {
		members = allRanks(c.World)
	}
	out := make([]int, len(members))
	for i, r := range members {
		out[i] = balance.ShareLimit(c.Memory.MicroCap[r], c.Memory.maxAccum())
	}
	return out
}

// proportionalShares is ProportionalShares under the memory plan
// (balance.PlanMicro: each of members' shares, every rank's when members
// is nil, within MaxAccum passes of its micro-batch cap). The members of
// an exact exclusion must take every row between them: when they cannot
// within MaxAccum passes, they get the uncapped shares and run more
// passes — MaxAccum bounds the plan, the cap bounds memory, and Micro
// never exceeds the cap.
func (c Config) proportionalShares(m int, perSample []float64, minShare int, members []int) ([]int, error) {
	if c.Memory == nil {
		return ProportionalShares(m, perSample, minShare)
	}
	limits := c.shareLimits(members)
	ranks := make([]balance.MemoryRank, len(perSample))
	for i, t := range perSample {
		r := i
		if members != nil {
			r = members[i]
		}
		lo := minShare
		if limits[i] > 0 {
			lo = min(lo, limits[i])
		}
		ranks[i] = balance.MemoryRank{Speed: 1e9 / math.Max(t, 1), MicroCap: c.Memory.MicroCap[r], MinBatch: lo}
	}
	plan, err := balance.PlanMicro(m, c.Memory.maxAccum(), ranks)
	if err != nil {
		if members != nil {
			return ProportionalShares(m, perSample, minShare)
		}
		return nil, fmt.Errorf("straggler: shares of %d samples under memory caps: %w", m, err)
	}
	shares := make([]int, len(plan.Ranks))
	for i, r := range plan.Ranks {
		shares[i] = r.Share
	}
	return shares, nil
}

// withinLimits reports whether shares fit every rank's memory plan
// (MaxAccum passes of its cap); true without one.
func (c Config) withinLimits(shares []int) bool {
	for r, l := range c.shareLimits(nil) {
		if l > 0 && shares[r] > l {
			return false
		}
	}
	return true
}

// Micro returns each rank's micro-batch and accumulation count for a
// plan's shares under the memory caps (balance.SplitShare: the fewest
// near-equal micro-batches, none above the cap), or one micro-batch per
// rank without a memory plan. A rank computing rows of a shorter batch
// (the epoch's last) splits them the same way (MicroOf).
func (c Config) Micro(p Plan) []balance.Micro {
	out := make([]balance.Micro, len(p.Shares))
	for r, s := range p.Shares {
		out[r] = c.MicroOf(r, s)
	}
	return out
}

// MicroOf splits rows of rank's share into micro-batches under its cap.
func (c Config) MicroOf(rank, rows int) balance.Micro {
	limit := 0
	if c.Memory != nil && rank < len(c.Memory.MicroCap) {
		limit = c.Memory.MicroCap[rank]
	}
	return balance.SplitShare(rows, limit)
}

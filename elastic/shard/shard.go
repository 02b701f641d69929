package shard

import "fmt"

// State is a shard's state within its epoch.
type State uint8

const (
	// Todo shards wait in the queue for a worker.
	Todo State = iota
	// Doing shards are held by exactly one worker.
	Doing
	// Done shards had their gradients applied.
	Done
)

// Shard is a contiguous range of sample indices [Offset, Offset+Length)
// in one epoch. Only two integers identify the data (AntDT: "each shard
// only contains two integers"); the rest lets a worker recompute the
// sample order without asking the service.
type Shard struct {
	// ID is unique across epochs: Epoch·K + Index.
	ID int64 `json:"id"`
	// Epoch is the 0-based epoch.
	Epoch int `json:"epoch"`
	// Index is the shard's position in the data, 0..K−1.
	Index int64 `json:"index"`
	// Offset is the first sample index.
	Offset int64 `json:"offset"`
	// Length is the number of samples.
	Length int64 `json:"length"`
	// Shuffled tells the worker to visit the samples in the seeded order
	// of Indices instead of Offset, Offset+1, ….
	Shuffled bool `json:"shuffled,omitempty"`
	// Seed is the job's shuffle seed.
	Seed uint64 `json:"seed,omitempty"`
}

// Indices returns the shard's sample indices in the order the worker
// should train them: ascending when not shuffled, otherwise a permutation
// of [Offset, Offset+Length) determined by (Seed, Epoch, Index) alone, so
// any process recomputes the same order.
func (s Shard) Indices() []int64 {
	out := make([]int64, s.Length)
	for i := range out {
		out[i] = s.Offset + int64(i)
	}
	if s.Shuffled {
		shuffle(out, newStream(s.Seed, uint64(s.Epoch), uint64(s.Index)+1))
	}
	return out
}

// String renders the shard as "#id e0 [offset,end)".
func (s Shard) String() string {
	return fmt.Sprintf("#%d e%d [%d,%d)", s.ID, s.Epoch, s.Offset, s.Offset+s.Length)
}

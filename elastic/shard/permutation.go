package shard

import (
	"math/bits"
	"math/rand/v2"
)

// The shuffles must be identical in every process and every Go release:
// the service shuffles the shard order, workers recompute the in-shard
// order. So this file fixes the whole chain: a PCG-DXSM generator (whose
// output math/rand/v2 specifies), seeds mixed with SplitMix64, Lemire's
// unbiased bounded integers, and Fisher–Yates from the top.

// newStream returns a generator for (seed, epoch, which); which = 0 is the
// epoch's shard order, which = i+1 the in-shard order of shard i.
func newStream(seed, epoch, which uint64) *rand.PCG {
	return rand.NewPCG(splitmix(seed^splitmix(epoch)), splitmix(which^0x9e3779b97f4a7c15))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// uniform returns a uniform integer in [0, n), n > 0 (Lemire 2019).
func uniform(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// shuffle permutes xs in place with Fisher–Yates.
func shuffle[T any](xs []T, src *rand.PCG) {
	for i := len(xs) - 1; i > 0; i-- {
		j := uniform(src, uint64(i+1))
		xs[i], xs[j] = xs[j], xs[i]
	}
}

// shardOrder returns the order in which epoch's shards enter the queue.
func shardOrder(cfg Config, epoch int) []int64 {
	k := cfg.NumShards()
	order := make([]int64, k)
	for i := range order {
		order[i] = int64(i)
	}
	if cfg.Shuffle {
		shuffle(order, newStream(cfg.Seed, uint64(epoch), 0))
	}
	return order
}

package train

// Shard returns the half-open range [lo, hi) of a global batch of n rows
// that rank takes in a world of the given size: contiguous, disjoint,
// covering 0..n-1, sizes differing by at most one (the first n%world ranks
// take one more). A rank's range is empty when n < world and rank ≥ n.
func Shard(n, rank, world int) (lo, hi int) {
	q, r := n/world, n%world
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

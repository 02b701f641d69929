package cost

import "time"

// The completion of ring.AllReduceLate moves units of about 1/LateRounds
// of a segment, so that its pipeline fills and drains in about
// 2/LateRounds of the late rank's transfer time, but of LateMinBytes at
// least (per-step costs stay small against the transfer) and LateMaxBytes
// (or the transport's chunk) at most: a sender runs ahead into its socket
// buffers, and the finished units the late rank waits for queue behind
// what its owner has buffered for its ring neighbour (docs/benchmarks-straggler-collectives.md,
// the late-rank allreduce on the test bed).
const (
	LateRounds   = 16
	LateMinBytes = 64 << 10
	LateMaxBytes = 256 << 10
)

// LateUnit is the unit, in elements of elem bytes, of the late-rank
// completion of a segment of seg elements, with the transport's chunk of
// chunkBytes (0: LateMaxBytes).
func LateUnit(seg, elem, chunkBytes int) int {
	es := max(1, elem)
	if chunkBytes <= 0 {
		chunkBytes = LateMaxBytes
	}
	unit := max((seg+LateRounds-1)/LateRounds, LateMinBytes/es)
	return max(1, min(unit, min(LateMaxBytes, chunkBytes)/es))
}

// LateUnits is the number of units per early rank's segment in the
// late-rank allreduce of bytes bytes among n ranks (one of them late).
func LateUnits(bytes, n int) int {
	if bytes <= 0 || n < 2 {
		return 0
	}
	seg := (bytes + n - 2) / (n - 1)
	unit := LateUnit(seg, 1, 0)
	return max(1, (seg+unit-1)/unit)
}

// Late is the time at which the late-rank allreduce (ring.AllReduceLate)
// of bytes bytes among members ends, one of them (late) arriving at
// lateAt and the others by early: the m = k−1 early ranks reduce-scatter
// among themselves in units as soon as they have all arrived, and the
// completion takes u·m + 2m − 2 unit slots once the late rank has arrived
// too (u units per segment, LateUnits). The early reduce-scatter runs at
// the slowest link among the early ranks, the completion at the slowest
// among all members (it moves units over the late rank's links). With a
// uniform Net it is LateOver of its one link, the simulator's price.
func (n *Net) Late(members []int, late int, bytes int, early, lateAt time.Duration) time.Duration {
	k := len(members)
	if k <= 2 {
		return max(early, lateAt) + n.Ring(members, bytes)
	}
	others := make([]int, 0, k)
	for _, r := range members {
		if r != late {
			others = append(others, r)
		}
	}
	return LateOver(n.Slowest(others), n.Slowest(members), k, bytes, early, lateAt)
}

// LateOver is Net.Late for k members whose slowest links are earlyLink
// among the early ranks and all among every member: the simulator, whose
// links are all alike, prices the late-rank allreduce with it.
func LateOver(earlyLink, all Link, k, bytes int, early, lateAt time.Duration) time.Duration {
	if k <= 2 {
		return max(early, lateAt) + all.Ring(k, bytes)
	}
	m := k - 1
	seg := (bytes + m - 1) / m
	u := max(1, LateUnits(bytes, k))
	unit := (seg + u - 1) / u
	rs := time.Duration((m-1)*u) * earlyLink.Send(unit)
	return max(lateAt, early+rs) + time.Duration(u*m+2*m-2)*all.Send(unit)
}

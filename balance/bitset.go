package balance

import "math/bits"

// sumSet is a fixed-capacity bitset over the integers 0..limit, used as the
// set of reachable partial sums in AdjustBSAccum's dynamic program. It
// tracks the span of words that may be non-zero (lo..hi, empty if lo > hi)
// so shifts touch only the occupied part.
type sumSet struct {
	words  []uint64
	limit  int
	lo, hi int
}

func newSumSet(limit int) *sumSet {
	return &sumSet{words: make([]uint64, limit/64+1), limit: limit, lo: 1, hi: 0}
}

func (s *sumSet) clone() *sumSet {
	c := *s
	c.words = append([]uint64(nil), s.words...)
	return &c
}

func (s *sumSet) copyFrom(src *sumSet) {
	copy(s.words, src.words)
	s.lo, s.hi = src.lo, src.hi
}

func (s *sumSet) clear() {
	if s.lo <= s.hi {
		clear(s.words[s.lo : s.hi+1])
	}
	s.lo, s.hi = 1, 0
}

func (s *sumSet) set(i int) {
	w := i >> 6
	s.words[w] |= 1 << uint(i&63)
	s.widen(w, w)
}

func (s *sumSet) widen(lo, hi int) {
	if s.lo > s.hi {
		s.lo, s.hi = lo, hi
		return
	}
	s.lo, s.hi = min(s.lo, lo), max(s.hi, hi)
}

func (s *sumSet) has(i int) bool {
	if i < 0 || i > s.limit {
		return false
	}
	return s.words[i>>6]&(1<<uint(i&63)) != 0
}

// orShifted sets s |= src << shift, dropping bits above limit. src may be s
// itself: words are updated from the top down, so every word read still
// holds its old value.
func (s *sumSet) orShifted(src *sumSet, shift int) {
	if shift > s.limit || src.lo > src.hi {
		return
	}
	ws, bs := shift>>6, uint(shift&63)
	last := len(s.words) - 1
	lo := src.lo + ws
	if lo > last {
		return
	}
	hi := min(src.hi+ws+1, last)
	if bs == 0 {
		hi = min(src.hi+ws, last)
		for i := hi; i >= lo; i-- {
			s.words[i] |= src.words[i-ws]
		}
	} else {
		for i := hi; i > lo; i-- {
			s.words[i] |= src.words[i-ws]<<bs | src.words[i-ws-1]>>(64-bs)
		}
		s.words[lo] |= src.words[lo-ws] << bs
	}
	// Clear bits above limit (a shift of 64 yields 0, so the mask is all
	// ones when limit&63 == 63).
	s.words[last] &= uint64(1)<<uint(s.limit&63+1) - 1
	s.widen(lo, hi)
}

// orProgression sets dst |= ∪_{k=0}^{count-1} src << (base + k·stride)
// with O(log count) shifted copies (binary doubling). cur is a work set of
// the same limit; its contents are destroyed.
func orProgression(dst, src *sumSet, base, stride, count int, cur *sumSet) {
	if count <= 0 || base > dst.limit {
		return
	}
	cur.clear()
	cur.orShifted(src, base) // cur = ∪_{k<block} src << (base + k·stride)
	offset, block := 0, 1
	for {
		if count&1 == 1 {
			if offset*stride <= dst.limit {
				dst.orShifted(cur, offset*stride)
			}
			offset += block
		}
		count >>= 1
		if count == 0 || offset*stride > dst.limit {
			return
		}
		if block*stride <= dst.limit {
			cur.orShifted(cur, block*stride)
		}
		block *= 2
	}
}

// highestAtMost returns the largest member ≤ x, or -1.
func (s *sumSet) highestAtMost(x int) int {
	if x > s.limit {
		x = s.limit
	}
	if x < 0 {
		return -1
	}
	w := x >> 6
	v := s.words[w] & (uint64(1)<<uint(x&63+1) - 1)
	for {
		if v != 0 {
			return w*64 + 63 - bits.LeadingZeros64(v)
		}
		w--
		if w < 0 {
			return -1
		}
		v = s.words[w]
	}
}

package inject

import "math/rand/v2"

// pattern identifies the random stream family of one injection pattern, so
// that two patterns never share draws.
type pattern uint64

const (
	patternSlowWorker pattern = iota + 1
	patternPowerLaw
	patternTransient
)

// stream is a deterministic random stream for one (seed, pattern, rank,
// step, index) tuple. It is a value: deriving one allocates nothing.
type stream struct{ pcg rand.PCG }

// newStream seeds a PCG generator from the tuple. Each component is folded
// in through the splitmix64 finaliser, a bijection, so distinct tuples give
// distinct seeds.
func newStream(seed uint64, p pattern, rank, step, index int) stream {
	h := mix64(seed ^ 0x5851f42d4c957f2d)
	h = mix64(h ^ uint64(p))
	h = mix64(h ^ uint64(int64(rank)))
	h = mix64(h ^ uint64(int64(step)))
	h = mix64(h ^ uint64(int64(index)))
	var s stream
	s.pcg.Seed(h, mix64(h^0x9e3779b97f4a7c15))
	return s
}

// float64 returns a uniform draw in [0, 1).
func (s *stream) float64() float64 {
	return float64(s.pcg.Uint64()>>11) * 0x1p-53
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

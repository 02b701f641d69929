package gradcode

import "math/rand"

// newRand returns a seeded source for tests.
func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

package ringtail

import (
	"context"
	"testing"
)

// Every frame protection (Config.FrameAuth) gives the exact sum over TCP,
// where frames are sealed: the check changes no value it passes.
func TestAllReduceOverTCPWithEveryFrameProtection(t *testing.T) {
	for _, mode := range []string{"", "integrity", "off", "encrypt"} {
		t.Run("mode="+mode, func(t *testing.T) {
			comms := startComms(t, 3, func(c *Config) { c.DisableUnix, c.FrameAuth = true, mode })
			const n = 3<<18 + 5 // several frames of the default chunk, and a ragged tail
			bufs := make([][]float32, len(comms))
			for r := range bufs {
				bufs[r] = make([]float32, n)
				for i := range bufs[r] {
					bufs[r][i] = float32((i%1000)*(r+1)) + 0.5
				}
			}
			noErrors(t, each(comms, func(r int, c *Comm) error {
				return c.AllReduce(context.Background(), Float32s(bufs[r]), Sum)
			}))
			for r := range bufs {
				for i, v := range bufs[r] {
					if want := float32((i%1000)*6) + 1.5; v != want {
						t.Fatalf("rank %d element %d: %v, want %v", r, i, v, want)
					}
				}
			}
		})
	}
}

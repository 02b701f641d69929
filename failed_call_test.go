package ringtail

import (
	"context"
	"testing"
	"time"
)

// A collective that fails leaves the caller's buffer alone once it has
// returned: no link goroutine may still fold or copy a peer's data into
// it (the caller may reuse the buffer at once, e.g. for the next
// generation of an elastic job). Rank 0 gives up on a large allreduce
// while rank 1's data is on its way; it then fills its buffer with a
// sentinel, and the sentinel must still be there once both communicators
// are closed (Close waits for every link goroutine). Before the executor
// halted a failed mesh's links, 6 of 10 runs saw rank 1's data land after
// rank 0's call had returned.
func TestAFailedCallLeavesTheBufferAlone(t *testing.T) {
	for _, tr := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"shm", nil},
		{"unix", func(c *Config) { c.DisableShm = true }},
		{"tcp", func(c *Config) { c.DisableUnix = true }},
	} {
		t.Run(tr.name, func(t *testing.T) { failedCallLeavesTheBufferAlone(t, tr.mutate) })
	}
}

func failedCallLeavesTheBufferAlone(t *testing.T, mutate func(*Config)) {
	const n = 8 << 20 // float32s: 32 MiB
	for try := range 3 {
		comms := startComms(t, 2, mutate)
		bufs := [2][]float32{make([]float32, n), make([]float32, n)}
		for i := range bufs[1] {
			bufs[1][i] = 1
		}
		errs := each(comms, func(r int, c *Comm) error {
			ctx := context.Background()
			if r == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
				defer cancel()
			}
			err := c.AllReduce(ctx, Float32s(bufs[r]), Sum)
			if r == 0 && err != nil {
				for i := range bufs[0] {
					bufs[0][i] = 7
				}
			}
			return err
		})
		for _, c := range comms {
			c.Close()
		}
		if errs[0] == nil {
			t.Logf("try %d: rank 0 finished within its deadline", try)
			continue
		}
		for i, v := range bufs[0] {
			if v != 7 {
				t.Fatalf("try %d: element %d of rank 0's buffer is %v after its call failed (%v): written after the call returned", try, i, v, errs[0])
			}
		}
	}
}

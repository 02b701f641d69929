package driver

import (
	"context"
	"fmt"

	"github.com/ringtail-ml/ringtail"
)

// Contribution tags: the step in the high bits, the kind in the low bit.
const (
	kindGradient uint32 = 0 // an evicted child's gradient, up to its parent
	kindResult   uint32 = 1 // a step's reduced buffer, down to a child
)

func tag(step int, kind uint32) uint32 { return uint32(step)<<1 | kind }

type mailKey struct {
	from int
	tag  uint32
}

// mailbox holds the eager contributions this rank received and has not yet
// used, keyed by sender and tag, so that the driver can wait for one
// particular message while others (a gradient of the next step, a late
// one) arrive in any order. It pulls from every other rank, so the Comm's
// own stash stays empty. Owned by the Driver's goroutine.
type mailbox struct {
	comm   Comm
	others []int
	held   map[mailKey]*ringtail.Contribution
}

func newMailbox(comm Comm, rank, world int) mailbox {
	m := mailbox{comm: comm, held: map[mailKey]*ringtail.Contribution{}}
	for r := 0; r < world; r++ {
		if r != rank {
			m.others = append(m.others, r)
		}
	}
	return m
}

// take returns the contribution from rank from with the given tag, waiting
// for it until ctx ends (ctx's error is returned unwrapped then, so callers
// can tell a wait that ran out from a failure).
func (m *mailbox) take(ctx context.Context, from int, t uint32) (*ringtail.Contribution, error) {
	want := mailKey{from, t}
	for {
		if c, ok := m.held[want]; ok {
			delete(m.held, want)
			return c, nil
		}
		c, err := m.comm.NextContribution(ctx, m.others)
		if err != nil {
			return nil, err
		}
		k := mailKey{c.From, c.Tag}
		if _, dup := m.held[k]; dup {
			c.Release()
			return nil, fmt.Errorf("driver: second contribution from rank %d with tag %d (step %d)", k.from, k.tag, k.tag>>1)
		}
		m.held[k] = c
	}
}

// size returns the number of contributions held.
func (m *mailbox) size() int { return len(m.held) }

// release returns every held contribution's memory.
func (m *mailbox) release() {
	for k, c := range m.held {
		c.Release()
		delete(m.held, k)
	}
}

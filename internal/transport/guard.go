package transport

import (
	"sync/atomic"
	"time"
)

// Guard keeps a collective's buffers from the links' goroutines once the
// collective has failed: the eager posts' Claim, for the sends and
// receives of a whole call. A link's reader enters the guard of the
// receive it is filling before each frame it copies or folds into the
// receive's buffer and leaves it after; a writer does the same around
// each frame it reads from a send's buffer. Revoke makes every later
// entry fail (the goroutine then drops the request and stops: the mesh
// has failed), and Mesh.TakeBack waits until no goroutine is inside: from
// then on nothing of the call touches the caller's buffers, whether or not
// the goroutines themselves have ended. The executor owns one Guard and
// resets it at the start of each call on the queued path (a call that
// succeeded has no request left with the links; after a failure the mesh
// runs no call).
type Guard struct {
	state atomic.Int64 // guardRevoked | goroutines inside
}

const guardRevoked = 1 << 62

// Reset readies the guard for a new call.
func (g *Guard) Reset() { g.state.Store(0) }

// enter reports whether the caller may touch the guarded buffers (a nil
// guard guards nothing); leave must follow a successful enter.
func (g *Guard) enter() bool {
	if g == nil {
		return true
	}
	if g.state.Add(1)&guardRevoked != 0 {
		g.state.Add(-1)
		return false
	}
	return true
}

func (g *Guard) leave() {
	if g != nil {
		g.state.Add(-1)
	}
}

// Revoke makes every later enter fail.
func (g *Guard) Revoke() { g.state.Or(guardRevoked) }

// inside is the number of goroutines inside the guard.
func (g *Guard) inside() int64 { return g.state.Load() &^ guardRevoked }

// settle waits at most d until no goroutine is inside; false if one still
// is.
func (g *Guard) settle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for g.inside() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Microsecond)
	}
	return true
}

// revokedError stops a writer whose send's guard was revoked.
type revokedError struct{}

func (revokedError) Error() string {
	return "transport: the call's buffers were taken back (it failed)"
}

// TakeBack takes a failed call's buffers back from the links: it revokes
// g, halts the failed mesh's links (Halt) and waits, at most the link
// silence, until no link goroutine is inside g, so that when it returns
// no goroutine reads or writes the call's buffers again. A goroutine still
// inside then (one whose frame did not end although its connection was
// closed or interrupted) is logged.
func (m *Mesh) TakeBack(g *Guard) {
	g.Revoke()
	m.Halt()
	if !g.settle(m.cfg.Link.Silence) {
		m.log.Error().Int64("inside", g.inside()).Dur("after", m.cfg.Link.Silence).
			Msg("release: a link goroutine is still copying a frame of the failed call")
	}
}

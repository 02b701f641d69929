package engine

import (
	"errors"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// The flight recorder's hooks (Settings.Flight): every call is recorded
// in execLocked; a failed call dumps the recorder before it returns (so a
// process that exits on the error has left its dump), and the recorder's
// goroutine dumps a rank that was between calls when the mesh failed
// (its peers' aborts fail it), or that got SIGUSR1.

// watchFlight starts the recorder's goroutine.
func (e *Engine) watchFlight() {
	if e.s.Flight == nil {
		return
	}
	var failed <-chan struct{}
	if e.mesh != nil {
		failed = e.mesh.Failed()
	}
	e.s.Flight.Watch(failed, e.failure, e.closedHere)
}

// failure describes the mesh's failure for a dump (nil while it has not
// failed).
func (e *Engine) failure() *flight.Failure {
	if e.mesh == nil {
		return nil
	}
	return failureOf(e.mesh.Failure())
}

func failureOf(te *transport.Error) *flight.Failure {
	if te == nil {
		return nil
	}
	return &flight.Failure{Kind: te.Kind.String(), Rank: te.Rank, Reporter: te.Reporter, Detail: te.Detail, Error: te.Error()}
}

// closedHere reports whether the mesh failed because this rank closed it
// (not a failure to dump).
func (e *Engine) closedHere() bool {
	f := e.mesh.Failure()
	return f != nil && f.Kind == transport.KindClosed && f.Rank == e.s.Rank
}

// dumpFailedLocked dumps the recorder after a call failed with err (the
// caller holds e.mu); a closed communicator is not a failure.
func (e *Engine) dumpFailedLocked(err error) {
	if e.s.Flight == nil || errors.Is(err, ErrClosed) {
		return
	}
	f := e.failure()
	if f == nil {
		var te *transport.Error
		if !errors.As(err, &te) {
			te = &transport.Error{Kind: transport.KindLocal, Rank: transport.NoRank, Reporter: e.s.Rank, Local: e.s.Rank, Err: err}
		}
		f = failureOf(te)
	}
	if e.mesh != nil && e.closedHere() {
		return
	}
	e.s.Flight.DumpFailure(f, true)
}

// queue records a call that finds another call running (its goroutine
// then waits for e.mu).
func (e *Engine) queue(c *Call) *flight.Ticket {
	d := wire.Desc{Collective: c.Spec.Collective, DType: uint8(c.DType), RedOp: uint8(c.Op), Root: uint32(c.Spec.Root), Count: uint64(c.Spec.Count)}
	return e.s.Flight.Queue(&d)
}

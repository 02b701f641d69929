package ringtail

import (
	"context"

	"github.com/ringtail-ml/ringtail/internal/engine"
)

// WithStep returns ctx labelled with the application's step (a training
// iteration, say): every collective called with that context carries the
// label in its descriptor, next to the call number, kind, root, count,
// element type and op, and fails on every rank with a *Error of
// KindMismatch naming the ranks and "the step" when a peer's call carries
// another label.
//
// Label the calls to catch a rank that skips a collective while its next
// one has the same shape: both are then the group's call k, so nothing
// else tells them apart, and without a label the ranks silently combine
// different steps' data (the skip is only caught later, when their call
// counts diverge at the end of a group's calls). Labels are compared in
// their low 32 bits. Unlabelled calls carry 0 and cost nothing; a
// labelled call costs the context lookup. Send and Recv ignore the label.
func WithStep(ctx context.Context, step uint64) context.Context {
	return engine.WithStep(ctx, step)
}

// WithCallSite returns ctx naming site as the call site of the
// collectives called with it, for the call-site check (Config.Debug
// "detail") of a binding whose callers are not Go code: the C API takes
// it from rt_call_site, the PyTorch backend from the Python stack. Ranks
// must name the same call the same way. Without it the check hashes the
// Go caller's program counters.
func WithCallSite(ctx context.Context, site string) context.Context {
	return engine.WithCallSite(ctx, site)
}
